"""The list of commands the ``coniti`` group registers, gathered from their modules."""

from __future__ import annotations

import click

__all__ = ["COMMANDS"]

COMMANDS: list[click.Command] = []
