"""Checks of user text, shared by the contracts (:mod:`coniti.contracts`) and the command line.
No third-party import.

Text is valid when it holds no lone surrogate (U+D800..U+DFFF). Python turns bytes that are not
UTF-8 into such code points when it decodes them with ``surrogateescape``, as it does for
command-line arguments and, under a C or POSIX locale, for stdin: a Latin-1 ``café`` arrives as
``'caf\\udce9'``. No UTF-8 encoder accepts them (nor do the embedders' tokenizers), so coniti refuses
them where text comes in, naming the field, instead of failing somewhere below.
"""

from __future__ import annotations

import re

__all__ = ["check_text", "text_problem", "valid_text"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def check_text(value: str, field: str) -> str:
    """``value`` unchanged when it is valid Unicode text, else ValueError naming ``field``.

    Refused: a lone surrogate (U+D800..U+DFFF), which is what bytes that are not UTF-8 become when
    Python decodes them with ``surrogateescape`` (a Latin-1 file on stdin, a command-line argument)
    and which neither UTF-8 nor the embedders can encode (see the module docstring). ASCII text is
    accepted without a scan."""
    problem = text_problem(value)
    if problem is not None:
        raise ValueError(f"{field} is {problem}")
    return value


def valid_text(value: str) -> bool:
    """True when ``value`` has no lone surrogate (what :func:`check_text` accepts)."""
    return value.isascii() or _LONE_SURROGATE.search(value) is None


def text_problem(value: str) -> str | None:
    """What is wrong with ``value`` as text (see :func:`check_text`), or None when nothing is."""
    if value.isascii():
        return None
    found = _LONE_SURROGATE.search(value)
    if found is None:
        return None
    return (
        f"not valid Unicode: a lone surrogate U+{ord(found.group()):04X} at position "
        f"{found.start()} (bytes that were not UTF-8, e.g. Latin-1; convert the input to UTF-8)"
    )


