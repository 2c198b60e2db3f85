"""Care commands: verify, rebuild (compact, stats and erase are in log_cmds)."""

from __future__ import annotations

from pathlib import Path

import click

from coniti.cli.app import CliError, common_options, settings

__all__ = ["COMMANDS", "store_size"]


def store_size(path: Path) -> int:
    """Bytes on disk of the files in a store directory."""
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


@click.command()
@common_options
def verify() -> None:
    """Check every event, the hash chain and the projections; exit 1 if a problem is found."""
    s = settings()
    with s.open_store() as store, s.out.progress("verifying"):
        report = store.verify()
    problems = list(report.problems)
    if s.json:
        s.out.json(
            {
                "events_checked": report.events_checked,
                "head_seq": report.head_seq,
                "head_hash": report.head_hash,
                "problems": problems,
            }
        )
    else:
        s.out.fields(
            [
                ("events checked", report.events_checked),
                ("head seq", report.head_seq),
                ("head hash", report.head_hash),
                ("problems", len(problems) or "none"),
            ]
        )
        for problem in problems:
            s.out.line(f"  {problem}")
    if problems:
        raise CliError(f"verify found {len(problems)} problem(s) in {s.store_path}")


@click.command()
@common_options
def rebuild() -> None:
    """Recompute every projection from the log alone."""
    s = settings()
    with s.open_store("write") as store, s.out.progress("rebuilding projections"):
        folded = store.rebuild()
    if s.json:
        s.out.json({"events": folded})
    else:
        s.out.line(f"rebuilt the projections from {folded} events")


COMMANDS: list[click.Command] = [verify, rebuild]
