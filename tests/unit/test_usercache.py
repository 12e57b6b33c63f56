"""The user cache: atomic whole entries, a corrupt or truncated entry is a miss and is rebuilt,
an unwritable cache is a miss (never a failure); and the projection's use of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_runtime import usercache
from checkpoint_runtime.collectors import builtin
from checkpoint_runtime.constants import PROJECTION_CACHE_KIND, USER_CACHE_FOLDER
from checkpoint_testenv.support.bytecode import child_env


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / USER_CACHE_FOLDER


def entry(cache: Path, kind: str, key: str) -> Path:
    return cache / kind / key


def test_a_written_entry_reads_back_and_leaves_no_scratch_file(cache: Path) -> None:
    assert usercache.read("k", "a") is None
    assert usercache.write("k", "a", b"payload")
    assert usercache.read("k", "a") == b"payload"
    assert sorted(p.name for p in (cache / "k").iterdir()) == ["a"]


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # truncated
        lambda data: data[:-1] + bytes([data[-1] ^ 1]),  # a flipped bit in the payload
        lambda data: b"",  # empty
        lambda data: b"not a cache entry at all",
    ],
)
def test_a_corrupt_entry_is_a_miss_and_the_next_write_replaces_it(cache: Path, damage) -> None:  # type: ignore[no-untyped-def]
    usercache.write("k", "a", b"payload")
    path = entry(cache, "k", "a")
    path.write_bytes(damage(path.read_bytes()))
    assert usercache.read("k", "a") is None
    assert usercache.write("k", "a", b"payload")
    assert usercache.read("k", "a") == b"payload"


def test_an_unwritable_cache_is_a_miss_not_an_error(cache: Path) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file where the folder should be")
    assert not usercache.write("k", "a", b"payload")
    assert usercache.read("k", "a") is None


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    root = usercache.cache_root()
    assert root is not None
    assert root.is_absolute()


def test_the_key_names_every_part_unambiguously() -> None:
    assert usercache.digest("ab", "c") != usercache.digest("a", "bc")
    assert usercache.digest(b"x") == usercache.digest("x")


WRITER = """
import sys
from checkpoint_runtime import usercache
payload = sys.argv[1].encode() * 200_000
for _ in range(20):
    assert usercache.write("race", "one", payload)
"""


def test_concurrent_writers_leave_one_whole_entry(cache: Path) -> None:
    env = child_env({**os.environ, "XDG_CACHE_HOME": str(cache.parent)})
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, letter], env=env) for letter in "abcd"
    ]
    seen = set()
    while any(writer.poll() is None for writer in writers):
        found = usercache.read("race", "one")
        if found is not None:
            seen.add(found[:1])
            assert found == found[:1] * 200_000  # never a mix of two writers, never partial
    assert all(writer.wait() == 0 for writer in writers)
    assert usercache.read("race", "one") in {letter.encode() * 200_000 for letter in "abcd"}
    assert [p.name for p in (cache / "race").iterdir()] == ["one"]


def test_the_projection_reuses_a_cached_size_and_rebuilds_a_corrupt_one(cache: Path) -> None:
    builtin._feed_sample.cache_clear()
    measured = builtin._feed_sample("objectstore/f9", 200, "uuid")
    (path,) = (cache / PROJECTION_CACHE_KIND).iterdir()
    assert json.loads(usercache.read(PROJECTION_CACHE_KIND, path.name) or b"") == list(measured)
    # A later process reads the entry instead of encoding: shown by planting another value.
    usercache.write(PROJECTION_CACHE_KIND, path.name, json.dumps([1, 2, 3]).encode())
    builtin._feed_sample.cache_clear()
    assert builtin._feed_sample("objectstore/f9", 200, "uuid") == (1, 2, 3)
    assert builtin._feed_bytes("objectstore/f9", 200, "uuid") == (1, 3)
    # A corrupt entry, or one of the older two-number shape, is measured again and rewritten.
    for damaged in (path.read_bytes()[:-2], None):
        if damaged is None:
            usercache.write(PROJECTION_CACHE_KIND, path.name, json.dumps([1, 3]).encode())
        else:
            path.write_bytes(damaged)
        builtin._feed_sample.cache_clear()
        assert builtin._feed_sample("objectstore/f9", 200, "uuid") == measured
        stored = usercache.read(PROJECTION_CACHE_KIND, path.name) or b""
        assert json.loads(stored) == list(measured)
    builtin._feed_sample.cache_clear()
