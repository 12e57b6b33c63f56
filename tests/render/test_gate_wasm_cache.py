"""The compiled policy module in the user's cache: written once, reused by later processes,
rebuilt when damaged; and instances sized for the module's data (no retry, no warning)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import wasmtime

from checkpoint_gate import wasmcache
from checkpoint_gate.engine import POLICY_WASM, VERDICTS, PolicyEngine, _load
from checkpoint_runtime.constants import POLICY_CACHE_KIND, USER_CACHE_FOLDER

LOAD = """
from checkpoint_gate.engine import PolicyEngine
PolicyEngine()
print("loaded")
"""


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / USER_CACHE_FOLDER / POLICY_CACHE_KIND


def load_in_process(cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache.parents[1])}
    return subprocess.run(
        [sys.executable, "-c", LOAD], env=env, capture_output=True, text=True, check=True
    )


def test_the_first_process_caches_the_compiled_module_and_prints_nothing_else(
    cache: Path,
) -> None:
    first = load_in_process(cache)
    assert first.stdout == "loaded\n"
    assert first.stderr == ""  # no "policy needed a larger initial memory" line
    (entry,) = cache.iterdir()
    assert entry.name == wasmcache.cache_key(POLICY_WASM.read_bytes())


def test_a_cached_module_is_not_compiled_again(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = wasmtime.Engine(_engine_config())
    wasm = POLICY_WASM.read_bytes()
    wasmcache.compiled_module(engine, wasm)  # fills the cache

    def no_compile(*args: object) -> None:
        raise AssertionError("compiled although the cache holds the module")

    monkeypatch.setattr(wasmtime.Module, "__init__", no_compile)
    module = wasmcache.compiled_module(wasmtime.Engine(_engine_config()), wasm)
    assert any(item.name == "memory" for item in module.imports)


@pytest.mark.parametrize("damage", ["truncate", "garbage-with-valid-checksum"])
def test_a_damaged_entry_is_ignored_and_rebuilt(cache: Path, damage: str) -> None:
    load_in_process(cache)
    (entry,) = cache.iterdir()
    good = entry.read_bytes()
    if damage == "truncate":
        entry.write_bytes(good[: len(good) // 2])
    else:  # a whole entry wasmtime refuses (another wasmtime build would look like this)
        from checkpoint_runtime import usercache

        usercache.write(POLICY_CACHE_KIND, entry.name, b"\x7fELF not a compiled module")
    again = load_in_process(cache)
    assert again.stdout == "loaded\n"
    assert again.stderr == ""
    assert entry.read_bytes() == good


def test_instances_start_with_the_pages_the_data_needs(
    caplog: pytest.LogCaptureFixture, cache: Path
) -> None:
    pages = wasmcache.data_pages(POLICY_WASM.read_bytes())
    assert pages is not None
    assert pages > 2  # more than opa-py-wasm's default: the reason for the sizing
    _load.cache_clear()
    with caplog.at_level(logging.WARNING, logger="opapywasm"):
        engine = PolicyEngine()
        assert engine.evaluate([]) == []
    assert not [r for r in caplog.records if "initial memory" in r.getMessage()]
    _load.cache_clear()


def test_data_pages_reads_a_minimal_module() -> None:
    # (module (memory (import "env" "memory") 1) (data (i32.const 131072) "abc"))
    wat = '(module (import "env" "memory" (memory 1)) (data (i32.const 131072) "abc"))'
    assert wasmcache.data_pages(wasmtime.wat2wasm(wat)) == 3
    assert wasmcache.data_pages(b"not wasm") is None
    assert wasmcache.data_pages(b"\0asm\x01\0\0\0\x0b\x05") is None  # truncated section


def test_the_policy_keeps_its_entrypoints(cache: Path) -> None:
    _load.cache_clear()
    assert VERDICTS in _load(POLICY_WASM).entrypoints
    _load.cache_clear()


def _engine_config() -> wasmtime.Config:
    config = wasmtime.Config()
    config.epoch_interruption = True
    return config
