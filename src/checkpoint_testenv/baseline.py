"""The baseline the shard format is measured against (tests and benchmarks): what the old design
and Helm do, gzip of the sorted compact JSON map."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping


def baseline_encode(rows: Mapping[str, str]) -> bytes:
    text = json.dumps(dict(rows), sort_keys=True, separators=(",", ":"))
    return gzip.compress(text.encode(), mtime=0)


def baseline_decode(blob: bytes) -> dict[str, str]:
    rows: dict[str, str] = json.loads(gzip.decompress(blob))
    return rows
