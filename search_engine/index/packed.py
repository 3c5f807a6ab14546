"""The index's small tables (msgpack and JSON): written, and read back only as the types written.

An index generation is read back from a directory someone else may have written to (a cache
dir inside a repository that commits it). Decoded as whatever it holds, a table costs what
its content says, not what its size does: 11 MB of msgpack empty arrays is about 1 GB of
Python lists, all allocated before any check could look at them. Decoded by type (msgspec),
the first value of the wrong kind ends the read, so a table costs about what honest values
of its size cost (a string or an integer per few bytes read), and the damage is found at
once. A table that does not decode raises ValueError (msgspec's errors are ValueErrors),
which `errors.reading` turns into IndexDamagedError: the index is rebuilt.
"""

from __future__ import annotations

from typing import Annotated, TypeVar

import msgspec

T = TypeVar("T")
#: A count, offset or size: never negative.
Natural = Annotated[int, msgspec.Meta(ge=0)]

_ENCODER = msgspec.msgpack.Encoder()


def pack(value: object) -> bytes:
    """`value` (lists, maps, strings, numbers, structs) as msgpack."""
    return _ENCODER.encode(value)


def unpack(data: bytes, kind: type[T]) -> T:
    """`data` decoded as `kind`; ValueError (msgspec's DecodeError or ValidationError) at the
    first value that is not of it."""
    return msgspec.msgpack.decode(data, type=kind)


def unpack_json(data: bytes | str, kind: type[T]) -> T:
    """`unpack` for a table kept as JSON."""
    return msgspec.json.decode(data, type=kind)
