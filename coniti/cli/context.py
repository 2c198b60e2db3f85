"""What every command shares: the settings of one call, the options, and point resolution.

Every option in :func:`common_options`, and ``--ns``, is accepted both before the command (``coniti
--json ls``, ``coniti --ns bob/home count``) and after it (``coniti ls --json``); a value given after
the command wins. ``--ns`` before a command that takes none is a usage error. The settings live in a
:class:`Settings` object created per call of :func:`coniti.cli.app.run`, never at module level.

Command modules import this module (and output, parse, show, types), never each other nor the app.
The library (``LogBackend``, the engine) is imported inside the functions that open it.
"""

from __future__ import annotations

import functools
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import click
from click.core import ParameterSource

from coniti.cli.output import Output
from coniti.cli.parse import format_namespace, format_time, resolve_store_path
from coniti.cli.types import NAMESPACE, POINT, TEXT, TIME
from coniti.errors import ConitiError

if TYPE_CHECKING:
    from coniti.actor import TimeRange
    from coniti.engine import ContinuityEngine
    from coniti.impl.log import LogBackend
    from coniti.memory import MemoryBackend

__all__ = [
    "CliError",
    "Settings",
    "as_of_option",
    "at_point",
    "common_options",
    "common_options_for",
    "group_ns_option",
    "ns_option",
    "range_options",
    "settings",
    "time_range",
    "view_as_of",
]

F = TypeVar("F", bound=Callable[..., Any])
V_co = TypeVar("V_co", covariant=True)


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
    cluster: str | None = None
    namespace: tuple[str, ...] | None = None
    """``--ns`` given before the command: the default of the command's own ``--ns``."""
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
        cluster_urls = self.cluster or self.environ.get("CONITI_CLUSTER") or None
        if cluster_urls is not None:  # a node's copy: opened writable, caught up with the stream
            from coniti.cluster import Cluster

            return LogBackend(
                path, actor=self.actor_name, cluster=Cluster.parse(cluster_urls, self.environ)
            )
        if mode != "create" and not (path.is_dir() and any(path.iterdir())):
            raise CliError(
                f"no store at {path} (choose one with --store or CONITI_STORE; "
                "'coniti add', 'load' or 'import' create one)"
            )
        return LogBackend(path, actor=self.actor_name, read_only=mode == "read")

    @contextmanager
    def undo_new_store(self) -> Iterator[None]:
        """For a command that may create the store (``load``): if it fails (Ctrl-C included) and
        the store directory did not exist before, the directories it created are removed again,
        provided the store holds no event by then. A failed load thus leaves no new directory."""
        path = self.store_path.absolute()
        top = path
        while not top.exists():
            if top.parent == top:
                break
            top, below = top.parent, top
        if top == path:  # it existed: nothing to undo
            yield
            return
        created = below
        try:
            yield
        except BaseException:
            _remove_if_empty_store(path, created)
            raise

    def check_new_store_model(self, embedding: str | None) -> None:
        """For a command that may create the store, before it opens it: when there is no store yet
        and the new one would get the ``minilm`` embedder (``embedding``, else
        ``$CONITI_EMBEDDING``, else minilm), :meth:`require_minilm`. So a command without a usable
        model fails in one line saying how to get one, and creates nothing. An existing store keeps
        the embedder it was written with and is not checked here."""
        path = self.store_path
        if path.is_dir() and any(path.iterdir()):
            return
        from coniti.container import NEW_MEMORY_EMBEDDING

        if (embedding or self.environ.get("CONITI_EMBEDDING") or NEW_MEMORY_EMBEDDING) == "minilm":
            self.require_minilm()

    def require_minilm(self) -> None:
        """Load the minilm model (then kept loaded for the engine): from the model package or the
        Hugging Face cache, else fetched once from the hub, with a line on stderr saying so. Raises
        :class:`~coniti.errors.ModelFileError`, one line saying why and how to get the model, when
        ``tokenizers`` is missing (before any fetch) or the model cannot be had."""
        from coniti import hub, minilm

        minilm.require_tokenizers()
        if minilm.model_on_disk(self.environ) is None and not hub.offline(self.environ):
            size = sum(f.size for f in minilm.HUB_MODEL.files) / 1e6
            self.out.hint(
                f"coniti: fetching the minilm model {minilm.HUB_REPO} ({size:.0f} MB, once) from "
                f"{hub.endpoint(self.environ)} into {hub.cache_dir(self.environ)}"
            )
        minilm.MiniLMEmbedder()

    @contextmanager
    def open_engine(
        self, store: LogBackend, embedding: str | None = None
    ) -> Iterator[ContinuityEngine]:
        """The engine over ``store`` with coniti's default pieces (:class:`~coniti.Container`) and
        the embedder the store was written with (:func:`~coniti.container.stored_embedding`); a
        store with none yet gets ``embedding``, else ``$CONITI_EMBEDDING``, else ``minilm``. A store
        holds one embedder: an ``embedding`` given for a store written with another is refused
        before anything is written, naming both and the way out. Over a writable store, a command
        that succeeds ends by saving the snapshots of derived state that lag by
        :data:`~coniti.engine.saver.SAVE_LAG` events or more (the command is a writer; a failure to
        save is ignored: the next open folds the events)."""
        from coniti.container import NEW_MEMORY_EMBEDDING, Container, stored_embedding
        from coniti.engine.saver import SAVE_LAG

        if embedding is None:
            fresh = self.environ.get("CONITI_EMBEDDING") or NEW_MEMORY_EMBEDDING
            embedding = stored_embedding(store, default=fresh)
        else:
            written = stored_embedding(store, default=embedding)
            if written != embedding:
                from coniti.embedding import EMBEDDERS

                raise CliError(
                    f"this store is embedded with {written} ({EMBEDDERS.create(written).spec_id}); "
                    f"a store holds one embedder, so --embedding {embedding} is refused and nothing "
                    "was written: leave --embedding out, or give another store with --store"
                )
        with Container(memory=store, embedding=embedding) as container:
            yield container.engine
            if not store.read_only:
                with suppress(Exception):  # derived state is optional; memory is intact
                    container.engine.persist(lagging=SAVE_LAG)

    def stamp(self, store: LogBackend) -> AbstractContextManager[None]:
        """The audit block that stamps events written inside it with ``--actor``/``--reason``."""
        if self.reason is None:
            return nullcontext()
        return store.audit(actor=self.actor_name, reason=self.reason)


def _remove_if_empty_store(path: Path, created: Path) -> None:
    """Remove ``created`` (``path`` or the first ancestor of it that this process created) when the
    store at ``path`` is absent or holds no event."""
    from coniti.impl.log import LogBackend

    if path.is_dir() and any(path.iterdir()):
        try:
            with LogBackend(path, read_only=True) as store:
                if store.head != 0:
                    return
        except ConitiError:
            pass  # a store this process began and could not finish
    shutil.rmtree(created, ignore_errors=True)


HINT_LIMIT = 8
"""How many namespaces a "nothing stored here" hint lists."""


def hint_if_unknown(
    s: Settings,
    memory: MemoryBackend,
    namespace: tuple[str, ...],
    *,
    prefix: bool = False,
    prefix_option: bool = True,
) -> None:
    """When ``namespace`` (or, with ``prefix``, every namespace under it) holds no notes, say so on
    stderr and list the namespaces that do, closest first; for a namespace that holds none itself
    but has namespaces with notes under it, list those and (``prefix_option``: the command has
    ``--prefix``) name ``--prefix``. The answer itself is unchanged."""
    from coniti.memory import closest_namespaces

    under = memory.namespaces(namespace)
    if (under if prefix else namespace in under):
        return
    if under and not prefix:
        named = [format_namespace(ns) for ns in under]
        more = f" (and {len(named) - HINT_LIMIT} more)" if len(named) > HINT_LIMIT else ""
        how = f"; --prefix {format_namespace(namespace)} takes them all" if prefix_option else ""
        s.out.hint(
            f"no notes in namespace {format_namespace(namespace)} itself; namespaces under it "
            f"with notes: {', '.join(named[:HINT_LIMIT])}{more}{how}"
        )
        return
    what = "under" if prefix else "in namespace"
    live = memory.namespaces()
    if not live:
        s.out.hint(f"no notes {what} {format_namespace(namespace)}: the store holds no notes yet")
        return
    near = [format_namespace(ns) for ns in closest_namespaces(namespace, live)]
    more = f" (and {len(near) - HINT_LIMIT} more)" if len(near) > HINT_LIMIT else ""
    s.out.hint(
        f"no notes {what} {format_namespace(namespace)}; namespaces with notes, closest first: "
        f"{', '.join(near[:HINT_LIMIT])}{more}"
    )


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


def _shared(
    *decls: str,
    setting: str,
    callback: Callable[[click.Context], None] | None = None,
    **kwargs: Any,
) -> Callable[[F], F]:
    """An option that sets ``Settings.<setting>`` when given, wherever it appears on the line;
    ``callback(ctx)`` runs first, whether it is given or not."""
    setter = _setter(setting)

    def both(ctx: click.Context, param: click.Parameter, value: Any) -> None:
        if callback is not None:
            callback(ctx)
        setter(ctx, param, value)

    return click.option(*decls, expose_value=False, callback=both, **kwargs)


def _no_stray_namespace(ctx: click.Context) -> None:
    """``--ns`` before a command without a ``--ns`` of its own is a usage error naming it (run as
    each command's options are read)."""
    obj = ctx.find_object(Settings)
    if obj is None or obj.namespace is None or isinstance(ctx.command, click.Group):
        return
    if not any(p.name == "namespace" for p in ctx.command.params):
        raise click.UsageError(f"--ns does not apply to '{ctx.info_name}'", ctx)


NS_FLAG = "--ns"
"""The namespace option's name, before the command (:data:`group_ns_option`) and after it
(:func:`ns_option`)."""

group_ns_option = click.option(
    NS_FLAG, "namespace", type=NAMESPACE, default=None, expose_value=False,
    callback=_setter("namespace"), metavar="NAMESPACE",
    help="Namespace of the command, as its own --ns gives it (coniti --ns bob/home count).",
)  # fmt: skip
"""``--ns`` before the command name: stored in :attr:`Settings.namespace`, the default of the
command's own ``--ns`` (see :func:`ns_option`)."""


STORE_HELP = "Store directory (default: $CONITI_STORE, else $XDG_DATA_HOME/coniti/store)."


def common_options(func: F) -> F:
    """Add --store, --json, --actor, --reason and --debug to a command or group."""
    return common_options_for(STORE_HELP)(func)


def common_options_for(store_help: str) -> Callable[[F], F]:
    """:func:`common_options` with ``store_help`` as the help of ``--store`` (``demo`` reads it as
    its own directory)."""
    return functools.partial(_add_common_options, store_help=store_help)


def _add_common_options(func: F, *, store_help: str) -> F:
    options = [
        _shared("--store", setting="store", metavar="PATH", help=store_help,
                callback=_no_stray_namespace),
        _shared("--json", "json_", setting="json", is_flag=True,
                help="Machine-readable output: one JSON document, or JSON lines for streams."),
        _shared("--actor", setting="actor", metavar="NAME", type=TEXT,
                help="Who is acting; stamped on the events written (default: $CONITI_ACTOR)."),
        _shared("--reason", setting="reason", metavar="TEXT", type=TEXT,
                help="Why; stamped on the events written."),
        _shared("--debug", setting="debug", is_flag=True, help="Show the full traceback on errors."),
        _shared("--cluster", setting="cluster", metavar="URLS",
                help="Cluster mode: the store is this node's copy of a NATS JetStream stream on these "
                     "servers (nats://h1:4222,nats://h2:4222; default: $CONITI_CLUSTER; stream "
                     "$CONITI_CLUSTER_STREAM, default coniti; a trusted checkpoint the stream must "
                     "extend: $CONITI_CLUSTER_CHECKPOINT, a note file, with $CONITI_CLUSTER_VERIFIER). "
                     "See docs/cluster.md."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def ns_option(
    help: str = "Namespace, e.g. alice/notes ('/' is the root).",
    *,
    default: str | None = "/",
) -> Callable[[F], F]:
    """``--ns NAMESPACE`` passed as ``namespace`` (a tuple of parts; see :mod:`coniti.cli.parse`).

    ``default=None`` means the command reads "no namespace given" (all, or each record's own); any
    other default is shown in ``--help``. ``--ns`` given before the command name
    (:data:`group_ns_option`) replaces the default.
    """
    return click.option(
        NS_FLAG,
        "namespace",
        type=NAMESPACE,
        default=default,
        show_default=default is not None,
        help=help,
        callback=_ns_before_command,
    )


def _ns_before_command(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """The command's ``--ns``: its own value when given, else the one given before the command,
    else its default."""
    if param.name is not None and ctx.get_parameter_source(param.name) is ParameterSource.DEFAULT:
        obj = ctx.find_object(Settings)
        if obj is not None and obj.namespace is not None:
            return obj.namespace
    return value


as_of_option = click.option(
    "--as-of",
    "as_of",
    type=POINT,
    default=None,
    metavar="SEQ|DATE",
    help="Read the memory as it was at this sequence number or ISO time.",
)
"""``--as-of SEQ|DATE`` passed as ``as_of``: a point (see :func:`at_point`) or ``None``."""


def range_options(func: F) -> F:
    """``--from`` and ``--to``, the note-time window, passed as ``start`` and ``end`` (see
    :func:`time_range`)."""
    func = click.option(
        "--to", "end", type=TIME, default=None, help="Note time before this (exclusive)."
    )(func)
    return click.option(
        "--from", "start", type=TIME, default=None, help="Note time at or after this."
    )(func)


def time_range(start: float | None, end: float | None) -> TimeRange | None:
    """The note-time window of --from/--to, or None when neither is given. ``--from`` after
    ``--to`` is a usage error (exit status 2)."""
    if start is None and end is None:
        return None
    if start is not None and end is not None and start > end:
        raise click.UsageError(
            f"--from ({format_time(start)}) is after --to ({format_time(end)}): the window is empty"
        )
    from coniti.actor import TimeRange

    return TimeRange(start=start, end=end)


class _TimeTravel(Protocol[V_co]):
    """Anything with ``at(seq)`` / ``at(time=...)``: a LogBackend (gives a view), an engine."""

    def at(self, seq: int | None = None, *, time: float | None = None) -> V_co: ...


def at_point(source: _TimeTravel[V_co], point: int | float) -> V_co:
    """``source`` at a point as :data:`~coniti.cli.types.POINT` reads it: an ``int`` is a sequence
    number (0..head, else the library's error), a ``float`` a recorded time (the last event at or
    before it)."""
    if isinstance(point, int):
        return source.at(point)
    return source.at(time=point)


def view_as_of(store: LogBackend, as_of: int | float | None) -> MemoryBackend:
    """What ``--as-of`` selects: the store itself when not given, else its view at that point."""
    return store if as_of is None else at_point(store, as_of)
