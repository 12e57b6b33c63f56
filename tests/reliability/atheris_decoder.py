"""Coverage-guided fuzzing of the shard decoder with atheris (optional; not collected by pytest).

atheris is not a project dependency. It installs from a prebuilt wheel (3.0.0, cp311
manylinux) into a separate venv; run with the project's sources and dependencies on the path:

    python -m venv /tmp/atheris-venv && /tmp/atheris-venv/bin/pip install atheris
    PYTHONPATH=src:.venv/lib/python3.11/site-packages \\
        /tmp/atheris-venv/bin/python tests/reliability/atheris_decoder.py -max_total_time=60 CORPUS

CORPUS is a folder seeded with one valid envelope (codec.encode_envelope of a few rows).

Property: decode_shard returns rows or raises CorruptShardError; anything else is a crash that
atheris reports with the input that caused it. Known bugs (test_rel_known_bugs.py) surface too.
"""

from __future__ import annotations

import contextlib
import sys

import atheris  # type: ignore[import-not-found]

with atheris.instrument_imports():
    from checkpoint_runtime.errors import CorruptShardError
    from checkpoint_runtime.format import codec

SHARD = "tn/objectstore/feed-a"


def one_input(data: bytes) -> None:
    """Fuzz the envelope layer (gzip is added here, so inputs reach the JSON decoder)."""
    with contextlib.suppress(CorruptShardError):
        codec.decode_shard(SHARD, codec.gzip_fixed(data))


if __name__ == "__main__":
    atheris.Setup([*sys.argv, "-seed=1"], one_input)
    atheris.Fuzz()
