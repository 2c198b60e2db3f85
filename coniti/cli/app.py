"""The click application: the ``coniti`` group, its commands, and error handling.

:data:`COMMANDS` is the one list of commands, each named by reference (``lambda: engine_cmds.add``),
so the type checker follows every entry to the click command it names. A command's module is
imported only when that command runs or is listed (``coniti --help``), so ``coniti ask`` loads
neither the demo nor the log commands: at run time the module names below are stand-ins that
import the module on first attribute access; the type checker sees the modules themselves.
"""

from __future__ import annotations

import importlib
import json
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import click

from coniti.cli.context import Settings, common_options, group_ns_option
from coniti.cli.parse import ParseError
from coniti.errors import ConitiError

__all__ = ["COMMANDS", "cli", "run"]


class _Module:
    """A command module of :mod:`coniti.cli`, imported on the first attribute read through it."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(f"coniti.cli.{self._name}"), attribute)


if TYPE_CHECKING:
    from coniti.cli import (
        care_cmds,
        cluster_cmds,
        conversation_cmds,
        demo_cmd,
        engine_cmds,
        feedback_cmds,
        file_cmds,
        lineage_cmds,
        log_cmds,
        mcp_cmd,
        memory_cmds,
        proof_cmds,
        write_cmds,
    )
else:
    care_cmds, demo_cmd, engine_cmds = _Module("care_cmds"), _Module("demo_cmd"), _Module("engine_cmds")
    feedback_cmds, file_cmds, log_cmds = _Module("feedback_cmds"), _Module("file_cmds"), _Module("log_cmds")
    mcp_cmd, memory_cmds, write_cmds = _Module("mcp_cmd"), _Module("memory_cmds"), _Module("write_cmds")
    conversation_cmds = _Module("conversation_cmds")
    cluster_cmds = _Module("cluster_cmds")
    proof_cmds = _Module("proof_cmds")
    lineage_cmds = _Module("lineage_cmds")

COMMANDS: dict[str, Callable[[], click.Command]] = {
    "add": lambda: engine_cmds.add,
    "ask": lambda: engine_cmds.ask,
    "get": lambda: memory_cmds.get,
    "rm": lambda: memory_cmds.rm,
    "ls": lambda: memory_cmds.ls,
    "count": lambda: memory_cmds.count,
    "meta": lambda: memory_cmds.meta,
    "dump": lambda: file_cmds.dump,
    "load": lambda: file_cmds.load,
    "log": lambda: log_cmds.log,
    "history": lambda: log_cmds.history,
    "diff": lambda: log_cmds.diff,
    "at": lambda: log_cmds.at_cmd,
    "export": lambda: log_cmds.export,
    "import": lambda: log_cmds.import_,
    "stats": lambda: care_cmds.stats,
    "verify": lambda: care_cmds.verify,
    "rebuild": lambda: care_cmds.rebuild,
    "compact": lambda: care_cmds.compact,
    "erase": lambda: care_cmds.erase,
    "demo": lambda: demo_cmd.demo,
    "mcp": lambda: mcp_cmd.mcp,
    "set": lambda: write_cmds.set_cmd,
    "update": lambda: write_cmds.update,
    "sweep": lambda: write_cmds.sweep,
    "improve": lambda: feedback_cmds.improve,
    "say": lambda: conversation_cmds.say,
    "window": lambda: conversation_cmds.window,
    "state": lambda: conversation_cmds.state,
    "cluster": lambda: cluster_cmds.cluster,
    "keygen": lambda: proof_cmds.keygen,
    "checkpoint": lambda: proof_cmds.checkpoint,
    "prove": lambda: proof_cmds.prove,
    "verify-checkpoint": lambda: proof_cmds.verify_checkpoint,
    "fork": lambda: proof_cmds.fork,
    "revert": lambda: proof_cmds.revert,
    "receipt": lambda: proof_cmds.receipt,
    "explain": lambda: lineage_cmds.explain_cmd,
    "blame": lambda: lineage_cmds.blame_cmd,
    "consolidate": lambda: lineage_cmds.consolidate_cmd,
}
"""Command name -> the click command of that name, read (and its module imported) on first use."""


class _Commands(click.Group):
    """The group of :data:`COMMANDS`, each loaded on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        load = COMMANDS.get(cmd_name)
        return None if load is None else load()


HELP = """coniti: durable, replayable, auditable memory for AI agents.

\b
The store is chosen by --store PATH, else $CONITI_STORE, else
$XDG_DATA_HOME/coniti/store (~/.local/share/coniti/store when unset).
Read commands never create a store.

\b
Namespaces: --ns alice/notes is ("alice", "notes"); '\\/' is a literal '/'
and '\\\\' a literal '\\' inside a part; '/' alone is the root namespace.
Times: ISO dates (2025-03-01, 2025-03-01T09:30; UTC unless a zone is given)
or epoch seconds. Points (--as-of, at, diff): a sequence number or an ISO time.

\b
Exit status: 0 success, 1 error (one line on stderr), 2 usage error."""


@click.group(cls=_Commands, help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="coniti", prog_name="coniti")
@common_options
@group_ns_option
def cli() -> None:
    pass


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the command, map every failure to an exit status (see :func:`main`).

    A failure is one line on stderr, ``coniti: error: ...``; with ``--json`` it is one JSON object
    instead, ``{"error": message, "kind": kind}``, with the same exit status. ``kind`` is ``usage``
    (status 2), ``aborted`` (130), ``error`` for what the command line itself refuses, the coniti
    error's class name (``MemoryFileError``, ``StoreFull`` ...) or ``OSError``, and ``internal``
    for a bug."""
    obj = Settings()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="coniti", standalone_mode=False, obj=obj)
        return result if isinstance(result, int) else 0
    except click.ClickException as exc:
        if obj.debug:
            traceback.print_exc()
        if obj.json or _asks_for_json(args):  # a usage error may come before --json is read
            kind = "usage" if isinstance(exc, click.UsageError) else "error"
            return _json_error(exc.format_message(), kind, exc.exit_code)
        exc.show()
        return exc.exit_code
    except click.Abort:
        if obj.json:
            return _json_error("aborted", "aborted", 130)
        click.echo("coniti: aborted", err=True)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except (ConitiError, ParseError, OSError) as exc:
        return _report(obj, exc, "error")
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] in ("click", "rich"):
            raise  # main() names the package to install (rich is imported on first output)
        return _report(obj, exc, "internal error", hint=True)
    except Exception as exc:
        return _report(obj, exc, "internal error", hint=True)


def _asks_for_json(args: list[str]) -> bool:
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


def _json_error(message: str, kind: str, status: int) -> int:
    document = {"error": " ".join(message.split("\n")), "kind": kind}
    click.echo(json.dumps(document, ensure_ascii=False), err=True)
    return status


def _report(obj: Settings, exc: BaseException, what: str, *, hint: bool = False) -> int:
    if obj.debug:
        traceback.print_exc()
    message = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in message:
        message = f"{message}: {exc.filename}"
    if obj.json:
        kind = "internal" if hint else type(exc).__name__
        if hint:
            message = f"{type(exc).__name__}: {message}"
        return _json_error(message, kind, 1)
    line = f"coniti: {what}: {type(exc).__name__}: {message}" if hint else f"coniti: {what}: {message}"
    if hint and not obj.debug:
        line += " (rerun with --debug for the traceback)"
    click.echo(" ".join(line.split("\n")), err=True)
    return 1
