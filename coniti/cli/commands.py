"""The commands the ``coniti`` group registers, gathered from their modules."""

from __future__ import annotations

import click

from coniti.cli import care_cmds, demo_cmd, engine_cmds, file_cmds, log_cmds, memory_cmds

__all__ = ["COMMANDS"]

COMMANDS: list[click.Command] = [
    engine_cmds.add,
    engine_cmds.ask,
    memory_cmds.get,
    memory_cmds.rm,
    memory_cmds.ls,
    memory_cmds.count,
    memory_cmds.meta,
    file_cmds.dump,
    file_cmds.load,
    log_cmds.log,
    log_cmds.history,
    log_cmds.diff,
    log_cmds.at_cmd,
    log_cmds.export,
    log_cmds.import_,
    care_cmds.verify,
    care_cmds.rebuild,
    care_cmds.compact,
    care_cmds.erase,
    log_cmds.stats,
    demo_cmd.demo,
]
