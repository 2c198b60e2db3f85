"""The commands the ``coniti`` group registers: every module's ``COMMANDS``."""

from __future__ import annotations

import click

from coniti.cli import care_cmds, demo_cmd, engine_cmds, file_cmds, log_cmds, memory_cmds

__all__ = ["COMMANDS"]

COMMANDS: list[click.Command] = [
    *engine_cmds.COMMANDS,
    *memory_cmds.COMMANDS,
    *file_cmds.COMMANDS,
    *log_cmds.COMMANDS,
    *care_cmds.COMMANDS,
    *demo_cmd.COMMANDS,
]
