"""Keyword tokenisation (:mod:`coniti.keyword`'s module docstring says what it does): NFKC,
case-folded ``\\w`` runs (:func:`coniti.embedding.tokenize`), and overlapping character bigrams
inside runs of scripts written without spaces."""

from __future__ import annotations

import re
from collections.abc import Sequence

from coniti.embedding import tokenize as word_tokens

__all__ = ["NO_SPACE", "tokenize", "tokens_of"]

NO_SPACE = (
    "\u0e00-\u0e7f"  # Thai
    "\u0e80-\u0eff"  # Lao
    "\u1000-\u109f"  # Myanmar
    "\u1780-\u17ff"  # Khmer
    "\u3040-\u309f"  # Hiragana
    "\u30a0-\u30ff"  # Katakana
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0003ffff"  # CJK extensions B and later
)
"""Character ranges of scripts written without spaces: tokenised as character bigrams."""

_SPLIT = re.compile(f"([{NO_SPACE}]+)")


def tokenize(text: str) -> list[str]:
    """The tokens of ``text`` in order (module docstring): NFKC, case-folded, ``\\w`` runs, bigrams
    for scripts without spaces."""
    return list(tokens_of(text, word_tokens(text)))


def tokens_of(text: str, words: Sequence[str]) -> Sequence[str]:
    """:func:`tokenize` of ``text`` from its word tokens ``words`` (:func:`coniti.embedding.tokenize`
    of it, which an embedder may have made already): ``words`` itself for an ASCII text, else a
    tuple (a batch's token sequences outlive collections; tuples of strings leave the collector's
    lists)."""
    if text.isascii():  # no character of a script without spaces
        return words
    out: list[str] = []
    for run in words:
        if not _SPLIT.search(run):
            out.append(run)
            continue
        for i, part in enumerate(_SPLIT.split(run)):
            if not part:
                continue
            if i % 2 == 0 or len(part) == 1:  # outside the no-space ranges, or a lone character
                out.append(part)
            else:
                out.extend(part[j : j + 2] for j in range(len(part) - 1))
    return tuple(out)
