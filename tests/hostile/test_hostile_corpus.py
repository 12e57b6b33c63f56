"""The hostile-input corpus (corpus.py) against the installed wheel and its gate: every case
exits as the contract says (0, 1 a finding, 2 a named error with its name; never 3), within
10 s and 256 MiB of peak RSS, and leaves a store it was pointed at byte-for-byte unchanged.

Time and memory are the command's own, from the rusage of its process (support/measured.py):
10 s of CPU time, and no case may outlive 30 s of wall time (it is killed, and fails). CPU time
is what the input costs; the wall time of one process on a shared two-core machine mostly
measures its neighbours (cases of one CPU second take 3-6 s there under load). The cases run
two at a time; the summary test prints the counts by outcome, the largest peak RSS and the
slowest case (wall and CPU).
"""

from __future__ import annotations

import functools
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from corpus import CASES, Case
from installed_helpers import Venv, clean_env

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.measured import Measured, run_measured

pytestmark = pytest.mark.installed

TIME_BOUND_SECONDS = 10.0  # CPU seconds of the command
WALL_BOUND_SECONDS = 30.0  # killed after this
RSS_BOUND_BYTES = 256 * 1024 * 1024
WORKERS = 2
LEASE = "checkpoint-runtime"
ROWS = {f"objectstore/f1/seen/o-{i}": f"2026-01-01T00:00:0{i}Z" for i in range(5)}
_FIRST_ERROR = re.compile(r"^error: (?:unexpected )?([A-Za-z_][A-Za-z0-9_]*): ")


def _write_store(folder: Path, poison: str) -> None:
    backend = FileBackend(folder / "store", LEASE)
    store = Store.open(backend, writer="corpus", epoch=1)
    store.batch({**ROWS, "objectstore/f1/cursor": "o-4"})
    store.flush()
    (shard,) = (folder / "store").glob("*.shard")
    header, _, blob = shard.read_bytes().partition(b"\n")
    # Only the poison asked for is made (the bomb costs half a CPU second, and most cases
    # want the good store).
    poisons: dict[str, Callable[[], bytes]] = {
        "good": shard.read_bytes,
        "empty": lambda: b"",
        "no-header": lambda: b"\x1f\x8b\x08\x00 no header line",
        "truncated": lambda: header + b"\n" + blob[: len(blob) // 2],
        "garbage-blob": lambda: header + b"\n" + os.urandom(256),
        "gzip-bomb": lambda: header + b"\n" + _gzip_bomb(300_000_000),
        "foreign": lambda: _relabeled(header) + b"\n" + blob,
    }
    shard.write_bytes(poisons[poison]())
    (folder / "bucket").mkdir()
    (folder / "bucket" / "late.json").write_text('{"n": 1}\n')
    (folder / "store.json").write_text(
        json.dumps(
            {
                "store": {"backend": "file", "path": str(folder / "store")},
                "collectors": [
                    {"kind": "objectstore", "feed": "f1", "url": (folder / "bucket").as_uri()}
                ],
                "sink": {"kind": "file", "path": str(folder / "records.jsonl")},
            }
        )
    )


@functools.cache
def _gzip_bomb(size: int) -> bytes:
    """`size` zero bytes gzipped (about a thousandth of it), built without holding them."""
    compressor = zlib.compressobj(1, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    parts = [compressor.compress(chunk) for _ in range(size >> 20)]
    return b"".join([*parts, compressor.flush()])


def _relabeled(header: bytes) -> bytes:
    document = json.loads(header)
    document["labels"] = {**document["labels"], "checkpoint-runtime.io/store": "0" * 16}
    return json.dumps(document).encode()


def _snapshot(folder: Path) -> dict[str, bytes]:
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def _prepare(case: Case, folder: Path) -> None:
    folder.mkdir(parents=True)
    if case.store is not None:
        _write_store(folder, case.store)
    for name, content in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = content() if callable(content) else content
        if isinstance(data, str):
            data = data.replace("{dir}", str(folder)).encode("utf-8")
        path.write_bytes(data)


def _environment() -> dict[str, str]:
    dropped = ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "POD_NAMESPACE", "CHECKPOINT_HELM")
    return {k: v for k, v in clean_env().items() if k not in dropped}


def _run(venv: Venv, case: Case, root: Path) -> tuple[Measured, bool]:
    folder = root / re.sub(r"[^A-Za-z0-9_.-]", "_", case.id)
    _prepare(case, folder)
    before = _snapshot(folder / "store")
    argv = [str(venv.cli), *(arg.replace("{dir}", str(folder)) for arg in case.argv)]
    result = run_measured(argv, cwd=folder, env=_environment(), timeout=TIME_BOUND_SECONDS * 3)
    unchanged = _snapshot(folder / "store") == before or case.store is None
    records = folder / "records.jsonl"
    if case.store is not None and records.exists() and records.read_text().strip():
        unchanged = False  # a refused run emitted records
    return result, unchanged


@pytest.fixture(scope="module")
def outcomes(
    gate_venv: Venv, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[Measured, bool]]:
    root = tmp_path_factory.mktemp("hostile")
    with ThreadPoolExecutor(WORKERS) as pool:
        futures = {case.id: pool.submit(_run, gate_venv, case, root) for case in CASES}
        return {case_id: future.result() for case_id, future in futures.items()}


def error_name(result: Measured) -> str | None:
    """The named error of a code-2 result: `error: <Name>: ...`, or `run`'s JSON error line."""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    if lines:
        match = _FIRST_ERROR.match(lines[0])
        if match:
            return match.group(1)
    for line in reversed(lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("level") == "error" and "error" in entry:
            return str(entry["error"])
    return None


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_case(case: Case, outcomes: dict[str, tuple[Measured, bool]]) -> None:
    result, unchanged = outcomes[case.id]
    shown = f"exit {result.code}\nstdout: {result.stdout[-1500:]}\nstderr: {result.stderr[-1500:]}"
    assert not result.killed, f"killed after {result.seconds:.1f} s\n{shown}"
    assert "Traceback" not in result.stderr, shown
    assert result.code == case.code, shown
    if case.code == 2:
        named = error_name(result)
        assert named is not None, shown
        if case.name is not None:
            assert named == case.name, shown
        else:  # any named error: a CheckpointError subclass, never "unexpected"
            assert "error: unexpected" not in result.stderr, shown
    assert result.cpu_seconds <= TIME_BOUND_SECONDS, f"{result.cpu_seconds:.1f} s CPU\n{shown}"
    assert result.peak_rss_bytes <= RSS_BOUND_BYTES, f"{result.peak_rss_bytes >> 20} MiB\n{shown}"
    assert unchanged, f"the store (or the sink) was changed\n{shown}"


def test_summary(outcomes: dict[str, tuple[Measured, bool]]) -> None:
    """Counts by outcome, the largest peak RSS and the slowest case (printed with -s / -rA)."""
    counts = Counter(
        {0: "0 success", 1: "1 finding", 2: "2 named error"}.get(r.code, f"{r.code} other")
        for r, _ in outcomes.values()
    )
    largest = max(outcomes.items(), key=lambda item: item[1][0].peak_rss_bytes)
    slowest = max(outcomes.items(), key=lambda item: item[1][0].seconds)
    costliest = max(outcomes.items(), key=lambda item: item[1][0].cpu_seconds)
    report = (
        f"hostile corpus: {len(outcomes)} cases: "
        + ", ".join(f"{count} x {label}" for label, count in sorted(counts.items()))
        + f"; largest peak RSS {largest[1][0].peak_rss_bytes / 2**20:.0f} MiB ({largest[0]})"
        + f"; slowest {slowest[1][0].seconds:.2f} s wall ({slowest[0]})"
        + f"; most CPU {costliest[1][0].cpu_seconds:.2f} s ({costliest[0]})"
    )
    print(report)
    assert len(outcomes) >= 150
    assert not [case_id for case_id, (r, _) in outcomes.items() if r.code == 3]
