"""The mcp command: serve the store to MCP clients through :mod:`coniti.integrations.mcp`.

The MCP SDK is imported only when the command runs (``coniti --help`` does not load it). Ctrl-C and
SIGTERM stop the server cleanly (exit status 0): HTTP sessions end, then the store is closed.

Over HTTP the server binds to 127.0.0.1 unless ``--http`` names another host; a host that is not
loopback (``0.0.0.0`` included) needs ``--token-file``, checked before the store is opened or
anything binds (:mod:`coniti.integrations.mcp_http`).
"""

from __future__ import annotations

import signal

import click

from coniti.cli.context import CliError, common_options, settings
from coniti.cli.parse import format_namespace
from coniti.cli.types import NAMESPACE
from coniti.errors import ContractError
from coniti.scope import Scope

__all__ = ["mcp"]


LOOPBACK = "127.0.0.1"
"""Where ``--http PORT`` binds."""


def _address(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, int] | None:
    """``[HOST:]PORT`` as ``(host, port)``, the host 127.0.0.1 when not given; a bad one is a usage
    error naming ``--http``."""
    if value is None:
        return None
    host, _, port = value.rpartition(":")
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"{value!r} is not [HOST:]PORT (e.g. 8000 or 127.0.0.1:8000)", ctx, param)
    return host.removeprefix("[").removesuffix("]") or LOOPBACK, int(port)


@click.command()
@click.option("--http", "http", default=None, metavar="[HOST:]PORT", callback=_address,
              help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; HOST is "
                   "127.0.0.1 unless given, and any other than loopback needs --token-file.")
@click.option("--token-file", "token_file", default=None, metavar="PATH",
              help="With --http: every request must send 'Authorization: Bearer TOKEN', TOKEN being "
                   "this file's one line (chmod 600; 16 characters or more).")
@click.option("--prefix", "prefix", type=NAMESPACE, default=None,
              help="Serve only this namespace and those under it, e.g. alice (default: all).")
@click.option("--scope", "scope", default=None, metavar="FIELD=VALUE[,...]",
              help="Serve through a scoped handle, e.g. user=alice or user=alice,agent=bot (fields: "
                   "app, user, agent, conversation): every write is stamped with it, every read "
                   "confined to it. Not with --prefix.")
@click.option("--read-only", "read_only", is_flag=True,
              help="Refuse every write tool (remember, update, forget).")
@click.option("--allow-erase", "allow_erase", is_flag=True,
              help="Offer the erase tool: a privacy erasure of every version of notes.")
@click.option("--embedding", "embedding", default=None, metavar="NAME",
              help="Embedder of a new store (default: $CONITI_EMBEDDING, else minilm); a store "
                   "holds one embedder: another is refused.")  # fmt: skip
@common_options
def mcp(
    http: tuple[str, int] | None,
    token_file: str | None,
    prefix: tuple[str, ...] | None,
    scope: str | None,
    read_only: bool,
    allow_erase: bool,
    embedding: str | None,
) -> None:
    """Serve the memory to MCP clients (agents): over stdin/stdout, or streamable HTTP with --http.

    Over HTTP, whoever reaches the port reads (and, unless --read-only, writes) the memory: the server
    binds to 127.0.0.1 unless told otherwise, and another address needs --token-file. There is no
    TLS: beyond a trusted network, put it behind a TLS proxy. Writes are stamped with --actor, else
    the client's name, and the reason each call gives (else --reason). Needs the MCP SDK: pip install
    'coniti[mcp]'."""
    from coniti.integrations.mcp_http import is_loopback, read_token

    s = settings()
    if read_only and allow_erase:
        raise click.UsageError("--read-only and --allow-erase contradict each other: give one")
    if token_file is not None and http is None:
        raise click.UsageError("--token-file applies to --http only (stdio has no network to guard)")
    if http is not None and token_file is None and not is_loopback(http[0]):
        raise click.UsageError(
            f"--http {http[0]}:{http[1]} serves beyond this machine, where anyone who reaches the "
            "port could read and write the memory: give --token-file PATH (or serve on 127.0.0.1)"
        )
    served: Scope | None = None
    if scope is not None:
        if prefix is not None:
            raise click.UsageError("--scope and --prefix: give one of them, not both")
        try:
            served = Scope.parse(scope)
        except ContractError as exc:
            raise click.BadParameter(str(exc), param_hint="'--scope'") from None
    token = None
    if token_file is not None:
        try:
            token = read_token(token_file)
        except ContractError as exc:
            raise click.BadParameter(str(exc), param_hint="'--token-file'") from None
    try:
        from coniti.integrations.mcp import create_server
        from coniti.integrations.mcp_http import serve_http
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] in ("mcp", "mcp_types"):
            raise CliError("coniti mcp needs the MCP SDK: pip install 'coniti[mcp]'") from None
        raise
    if not read_only:  # it may create the store
        s.check_new_store_model(embedding)
    subtree = () if prefix is None else prefix
    with s.open_store("write" if read_only else "create") as store, s.open_engine(store, embedding) as engine:
        server = create_server(
            engine, prefix=subtree, scope=served, read_only=read_only, allow_erase=allow_erase,
            actor=s.actor_name, reason=s.reason,
        )  # fmt: skip
        where = "stdin/stdout" if http is None else f"http://{http[0]}:{http[1]}/mcp"
        guard = "" if token is None else " (bearer token required)"
        what = format_namespace(subtree) if served is None else f"scope {served}"
        s.out.hint(f"coniti: serving {s.store_path} ({what}) over MCP on {where}{guard}")
        previous = signal.signal(signal.SIGTERM, _interrupt)
        try:
            if http is None:
                server.run()
            else:
                serve_http(server, http[0], http[1], token=token)
        except KeyboardInterrupt:
            s.out.hint("coniti: stopped")
        finally:
            signal.signal(signal.SIGTERM, previous)


def _interrupt(signum: int, frame: object) -> None:
    """SIGTERM ends the server as Ctrl-C does: a clean stop (the store closed, exit status 0)."""
    raise KeyboardInterrupt
