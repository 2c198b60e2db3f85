"""Opaque, authenticated scan cursors shared by the built-in backends.

A cursor names a position ``(timestamp, order)`` in one namespace of one backend instance (or store).
It is ``base64url(payload) + "." + base64url(mac)`` where the MAC is keyed by a secret of the instance,
so a malformed, edited, foreign-instance or foreign-namespace cursor raises :class:`InvalidCursor`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math

from coniti.errors import InvalidCursor, namespace_text

__all__ = ["CursorCodec"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class CursorCodec:
    """Encodes and checks cursors for one backend instance, keyed by ``secret``."""

    __slots__ = ("_secret",)

    def __init__(self, secret: bytes) -> None:
        self._secret = secret

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()[:16]

    def encode(self, namespace: tuple[str, ...], timestamp: float, order: int) -> str:
        """A cursor that resumes after position ``(timestamp, order)`` of ``namespace``."""
        payload = json.dumps([list(namespace), timestamp, order], separators=(",", ":")).encode()
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def decode(self, cursor: str, namespace: tuple[str, ...]) -> tuple[float, int]:
        """The position in ``cursor``; raises :class:`InvalidCursor` unless it is ours and for ``namespace``."""
        if not isinstance(cursor, str) or not cursor:
            raise InvalidCursor("the cursor is empty")
        try:
            body, mac = cursor.split(".")
            payload = _unb64(body)
            given = _unb64(mac)
        except (ValueError, binascii.Error):
            raise InvalidCursor("the cursor is malformed") from None
        if not hmac.compare_digest(given, self._mac(payload)):
            raise InvalidCursor("the cursor was not issued by this backend instance")
        ns, timestamp, order = json.loads(payload)
        if tuple(ns) != namespace:
            raise InvalidCursor(
                f"the cursor belongs to namespace {namespace_text(ns)}, not {namespace_text(namespace)}"
            )
        if not isinstance(timestamp, float) or not math.isfinite(timestamp) or not isinstance(order, int):
            raise InvalidCursor("the cursor is malformed")
        return timestamp, order
