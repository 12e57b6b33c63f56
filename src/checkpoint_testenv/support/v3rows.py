"""Decoding a v3 shard from its head and chunk blobs, independently of the store's own reader.

The checker (`kubetarget`) and the codec's unit tests read v3 shards with this, so that a fault in
the store's reading path (`store/opening.py`) cannot hide itself from the tests.
"""

from __future__ import annotations

from collections.abc import Iterable

from checkpoint_runtime.format import codec_v3


def v3_rows(shard: str, head: codec_v3.DecodedHead, chunk_blobs: Iterable[bytes]) -> dict[str, str]:
    """The rows of `shard`: its active chunks' blobs in partition order (read lazily, so a
    generator may check each before it is decoded), each decoded within what is left of the
    head's budgets, then assembled with the head."""
    budget, chars, chunks = head.budget, head.chars_budget, []
    for index, blob in enumerate(chunk_blobs):
        chunk = codec_v3.decode_chunk(
            shard,
            blob,
            index,
            head.manifest.partitions,
            budget,
            encoding=head.encoding,
            chars_budget=chars,
        )
        budget -= chunk.raw_bytes
        chars -= chunk.chars
        chunks.append(chunk.rows)
    return codec_v3.assemble(shard, head, chunks).rows
