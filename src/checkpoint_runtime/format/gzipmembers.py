"""gzip members with a fixed header, and bounded decoding of a multi-member gzip stream.

Every member we write carries the same hand-written header (mtime 0, OS unknown), so equal
input gives equal bytes. Two deflaters: zlib level 9 (the `gzip-shards-v1` writer and the
baseline, unchanged) and libdeflate (the `deflate` package, pinned: its output is deterministic
per version) for `gzip-shards-v2`, smaller than zlib 9 at a fraction of its time. Inflating
always uses zlib, member by member, with one output budget for the whole stream.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from typing import Any

import deflate

from checkpoint_runtime.constants import FAST_DEFLATE_LEVEL, GZIP_LEVEL
from checkpoint_runtime.errors import CorruptShardError

# gzip member header: magic, deflate, no flags, mtime 0, "max compression", OS unknown.
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"


def _member(data: bytes, body: bytes | bytearray) -> bytes:
    return GZIP_HEADER + body + struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)


def gzip_fixed(data: bytes) -> bytes:
    """One gzip member, zlib level 9, fixed header: deterministic for equal input."""
    compressor = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS, 9)
    return _member(data, compressor.compress(data) + compressor.flush())


def gzip_fast(data: bytes, level: int = FAST_DEFLATE_LEVEL) -> bytes:
    """One gzip member, libdeflate, fixed header: deterministic for equal input and level."""
    return _member(data, deflate.deflate_compress(data, level))


def member_crc(member: bytes) -> int:
    """The CRC-32 of a member's uncompressed data, read from its trailer."""
    crc: int = struct.unpack("<I", member[-8:-4])[0]
    return crc


@dataclass(frozen=True)
class Member:
    """One inflated member: its data and where its bytes end in the stream."""

    data: bytes
    end: int


def gunzip_members(blob: bytes, limit: int, shard: str) -> list[Member]:
    """Inflate every member of `blob`, refusing more than `limit` bytes of output in total
    (a gzip bomb stops at the bound, whichever member carries it)."""
    members: list[Member] = []
    offset, budget = 0, limit
    while True:
        if members and blob[offset : offset + 2] != GZIP_HEADER[:2]:
            raise CorruptShardError(shard, "trailing bytes after the gzip member")
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out = _inflate(inflater, blob[offset:], budget)
        except zlib.error as error:
            where = "trailing bytes after the gzip member: " if members else ""
            raise CorruptShardError(shard, f"{where}bad gzip data: {error}") from None
        if out is None:
            raise CorruptShardError(shard, f"decoded envelope exceeds {limit} bytes")
        if not inflater.eof:
            raise CorruptShardError(shard, "truncated gzip data")
        budget -= len(out)
        offset = len(blob) - len(inflater.unused_data)
        members.append(Member(out, offset))
        if not inflater.unused_data:
            return members


_CHUNK = 4 << 20


def _inflate(inflater: Any, data: bytes, budget: int) -> bytes | None:
    """Inflate one member in chunks; None as soon as it passes `budget` bytes (a bomb is
    refused holding about `budget` bytes, not the twice that one growing buffer would take)."""
    chunks: list[bytes] = []
    size = 0
    pending = data
    while True:
        chunk = inflater.decompress(pending, _CHUNK)
        chunks.append(chunk)
        size += len(chunk)
        if size > budget:
            return None
        pending = inflater.unconsumed_tail
        if not pending or inflater.eof:
            return b"".join(chunks) if len(chunks) > 1 else chunks[0]


def gunzip_bounded(blob: bytes, limit: int, shard: str) -> bytes:
    """Decompress exactly one gzip member, refusing more than `limit` bytes of output."""
    members = gunzip_members(blob, limit, shard)
    if len(members) != 1:
        raise CorruptShardError(shard, "trailing bytes after the gzip member")
    return members[0].data
