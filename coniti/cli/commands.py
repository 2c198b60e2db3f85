"""The commands the ``coniti`` group registers, gathered from their modules."""

from __future__ import annotations

import click

from coniti.cli import care_cmds, engine_cmds, file_cmds, memory_cmds

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
    care_cmds.verify,
    care_cmds.rebuild,
]
