"""Protobuf wire format built by hand, for tests that need bytes no encoder would write."""

from __future__ import annotations

__all__ = ["len_field", "varint"]


def varint(value: int) -> bytes:
    """A base-128 varint, least significant group first."""
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def len_field(number: int, payload: bytes) -> bytes:
    """Field ``number`` with the length-delimited wire type (2) holding ``payload``."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload
