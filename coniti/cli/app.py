"""The click application: global options, store selection, error handling and command registration.

Every option in :func:`common_options` is accepted both before the command (``coniti --json ls``) and
after it (``coniti ls --json``); a value given after the command wins. The settings live in a
:class:`Settings` object created per call of :func:`run`, never at module level.
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

import click

from coniti.cli.output import Output
from coniti.cli.parse import ParseError, resolve_store_path
from coniti.errors import ConitiError

if TYPE_CHECKING:
    from coniti.engine import ContinuityEngine
    from coniti.impl.log import LogBackend

__all__ = ["CliError", "Settings", "cli", "common_options", "run"]

F = TypeVar("F", bound=Callable[..., Any])


class CliError(click.ClickException):
    """A failure the command line itself detects (missing store, refused note); exit status 1."""

    exit_code = 1

    def show(self, file: Any = None) -> None:
        click.echo(f"coniti: error: {self.format_message()}", err=True)


@dataclass
class Settings:
    """The options shared by every command, and the environment they were read with."""

    environ: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    store: str | None = None
    json: bool = False
    actor: str | None = None
    reason: str | None = None
    debug: bool = False
    _output: Output | None = None

    @property
    def store_path(self) -> Path:
        """``--store``, else ``$CONITI_STORE``, else the per-user default (see ``coniti --help``)."""
        return resolve_store_path(self.store, self.environ)

    @property
    def actor_name(self) -> str | None:
        """``--actor``, else ``$CONITI_ACTOR``, else ``None`` (the event carries no actor)."""
        return self.actor or self.environ.get("CONITI_ACTOR") or None

    @property
    def out(self) -> Output:
        """The output for this call (created on first use)."""
        if self._output is None:
            self._output = Output(json_mode=self.json)
        return self._output

    def open_store(self, mode: Literal["read", "write", "create"] = "read") -> LogBackend:
        """Open the selected store: ``"read"`` (read-only) and ``"write"`` need an existing, non-empty
        store directory; ``"create"`` makes one if missing. Only ``"create"`` makes a store."""
        from coniti.impl.log import LogBackend

        path = self.store_path
        if mode != "create" and not (path.is_dir() and any(path.iterdir())):
            raise CliError(
                f"no store at {path} (choose one with --store or CONITI_STORE; "
                "'coniti add', 'load' or 'import' create one)"
            )
        return LogBackend(path, actor=self.actor_name, read_only=mode == "read")

    @contextmanager
    def open_engine(self, store: LogBackend) -> Iterator[ContinuityEngine]:
        """The engine over ``store`` with coniti's default pieces (:class:`~coniti.Container`)."""
        from coniti.container import Container

        with Container(memory=store) as container:
            yield container.engine

    def stamp(self, store: LogBackend) -> AbstractContextManager[None]:
        """The audit block that stamps events written inside it with ``--actor``/``--reason``."""
        if self.reason is None:
            return nullcontext()
        return store.audit(actor=self.actor_name, reason=self.reason)


def settings() -> Settings:
    """The :class:`Settings` of the running command."""
    return click.get_current_context().find_object(Settings) or Settings()


def _setter(name: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return
        obj = ctx.find_object(Settings)
        if obj is not None:
            setattr(obj, name, value)

    return callback


def common_options(func: F) -> F:
    """Add --store, --json, --actor, --reason and --debug to a command or group."""
    options = [
        click.option(
            "--store",
            metavar="PATH",
            default=None,
            expose_value=False,
            callback=_setter("store"),
            help="Store directory (default: $CONITI_STORE, else $XDG_DATA_HOME/coniti/store).",
        ),
        click.option(
            "--json",
            "json_",
            is_flag=True,
            default=False,
            expose_value=False,
            callback=_setter("json"),
            help="Machine-readable output: one JSON document, or JSON lines for streams.",
        ),
        click.option(
            "--actor",
            metavar="NAME",
            default=None,
            expose_value=False,
            callback=_setter("actor"),
            help="Who is acting; stamped on the events written (default: $CONITI_ACTOR).",
        ),
        click.option(
            "--reason",
            metavar="TEXT",
            default=None,
            expose_value=False,
            callback=_setter("reason"),
            help="Why; stamped on the events written.",
        ),
        click.option(
            "--debug",
            is_flag=True,
            default=False,
            expose_value=False,
            callback=_setter("debug"),
            help="Show the full traceback on errors.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


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


@click.group(help=HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="coniti", prog_name="coniti")
@common_options
def cli() -> None:
    pass


def _register() -> None:
    from coniti.cli import commands

    for command in commands.COMMANDS:
        cli.add_command(command)


_register()


def run(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, run the command, map every failure to an exit status (see :func:`main`)."""
    obj = Settings()
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        result = cli.main(args=args, prog_name="coniti", standalone_mode=False, obj=obj)
        return result if isinstance(result, int) else 0
    except click.ClickException as exc:
        if obj.debug:
            traceback.print_exc()
        exc.show()
        return exc.exit_code
    except click.Abort:
        click.echo("coniti: aborted", err=True)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else 1
    except (ConitiError, ParseError, OSError) as exc:
        return _report(obj, exc, "error")
    except Exception as exc:
        return _report(obj, exc, "internal error", hint=True)


def _report(obj: Settings, exc: BaseException, what: str, *, hint: bool = False) -> int:
    if obj.debug:
        traceback.print_exc()
    message = str(exc) or type(exc).__name__
    if isinstance(exc, OSError) and exc.filename is not None and str(exc.filename) not in message:
        message = f"{message}: {exc.filename}"
    line = f"coniti: {what}: {type(exc).__name__}: {message}" if hint else f"coniti: {what}: {message}"
    if hint and not obj.debug:
        line += " (rerun with --debug for the traceback)"
    click.echo(" ".join(line.split("\n")), err=True)
    return 1
