"""Byte encodings shared by the store backends.

Integers that are keys (vUINs) are 8-byte big-endian so LMDB's byte order is numeric order;
everything structured is cbor2, which is compact, typed and needs no schema to read back.
"""

from __future__ import annotations

import struct
from typing import Any, Final

import cbor2

__all__ = ["decode_u64", "decode_value", "encode_u64", "encode_value"]

_U64: Final = struct.Struct(">Q")


def encode_u64(value: int) -> bytes:
    return _U64.pack(value)


def decode_u64(raw: bytes) -> int:
    return int(_U64.unpack(raw)[0])


def encode_value(value: Any) -> bytes:
    return cbor2.dumps(value)


def decode_value(raw: bytes) -> Any:
    return cbor2.loads(raw)
