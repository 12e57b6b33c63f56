"""The policy module as opa-py-wasm runs it, without its two per-process costs.

- Compiling: wasmtime compiles the module to machine code (about 0.4 s) in every process. The
  compiled module is serialized into the user's cache directory (checkpoint_runtime.usercache:
  atomic, checksummed entries), keyed by the module's SHA-256, the wasmtime version and the
  engine settings, and later processes deserialize it. An entry wasmtime refuses (another
  version, a damaged file) is a miss: the module is compiled again and the entry rewritten.
- Instantiating: opa-py-wasm gives the module 2 pages of memory, too few for the data segments
  OPA bakes into it; it traps, doubles and retries, and logs "policy needed a larger initial
  memory" on every instantiation. The pages the data segments need are read off the module's
  data section, and every instance starts with them.

opa-py-wasm (pinned) builds its engine and module inside `OpaWasmPolicy()`; `policy_from_wasm`
hands it this factory for the duration of that call.
"""

from __future__ import annotations

import hashlib
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import PackageNotFoundError, version

import opapywasm.policy
import opapywasm.runtime
import wasmtime
from opapywasm import OpaWasmPolicy, PolicyConfig
from opapywasm.runtime import (
    BuiltinDispatch,
    EpochTicker,
    WasmtimeRuntime,
    WasmtimeRuntimeFactory,
)

from checkpoint_runtime import usercache
from checkpoint_runtime.constants import POLICY_CACHE_KIND

WASM_PAGE_BYTES = 64 * 1024
_DATA_SECTION, _IMPORT_SECTION = 11, 2
_I32_CONST, _END = 0x41, 0x0B
# Module-level names of opa-py-wasm swapped while a policy is built or instantiated.
_HOOKS = threading.RLock()  # a policy build instantiates its probe inside the swap


def _leb(data: bytes, at: int, signed: bool = False) -> tuple[int, int]:
    """The LEB128 number at `at` (unsigned, or signed) and the offset after it."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return (value - (1 << shift) if signed and byte & 0x40 else value), at


def data_pages(wasm: bytes) -> int | None:
    """The memory pages the module's active data segments reach (None: not readable as a
    module with constant segment offsets; the library's own retry then applies)."""
    try:
        if wasm[:4] != b"\0asm":
            return None
        at, reach = 8, 0
        while at < len(wasm):
            section = wasm[at]
            size, at = _leb(wasm, at + 1)
            if section == _DATA_SECTION:
                reach = max(reach, _data_reach(wasm, at))
            at += size
        return math.ceil(reach / WASM_PAGE_BYTES)
    except (IndexError, ValueError):
        return None


def _data_reach(wasm: bytes, at: int) -> int:
    count, at = _leb(wasm, at)
    reach = 0
    for _ in range(count):
        flags, at = _leb(wasm, at)
        offset = 0
        if flags in (0, 2):  # active: [memory index,] constant offset expression
            if flags == 2:
                _, at = _leb(wasm, at)
            if wasm[at] != _I32_CONST:
                raise ValueError("a data segment offset that is not an i32 constant")
            offset, at = _leb(wasm, at + 1, signed=True)
            if wasm[at] != _END:
                raise ValueError("a data segment offset expression of more than one constant")
            at += 1
        elif flags != 1:  # 1: passive, copied on demand
            raise ValueError(f"unknown data segment flags {flags}")
        length, at = _leb(wasm, at)
        at += length
        if flags != 1:
            reach = max(reach, offset + length)
    return reach


def cache_key(wasm: bytes) -> str:
    """The module, the engine that compiles it, and the engine's settings. (wasmtime also
    refuses an artifact of another version or configuration itself: that is a miss.)"""
    try:
        engine = version("wasmtime")
    except PackageNotFoundError:
        engine = "unknown"
    digest = hashlib.sha256(wasm).hexdigest()
    return usercache.digest(digest, "wasmtime", engine, "epoch_interruption")


def compiled_module(engine: wasmtime.Engine, wasm: bytes) -> wasmtime.Module:
    """The module compiled for `engine`: from the user's cache, else compiled and cached."""
    key = cache_key(wasm)
    cached = usercache.read(POLICY_CACHE_KIND, key)
    if cached is not None:
        try:
            return wasmtime.Module.deserialize(engine, cached)
        except wasmtime.WasmtimeError:
            pass  # another wasmtime build, or damaged: compile again and replace it
    wasmtime.Module.validate(engine, wasm)
    module = wasmtime.Module(engine, wasm)
    usercache.write(POLICY_CACHE_KIND, key, bytes(module.serialize()))
    return module


class CachedRuntimeFactory(WasmtimeRuntimeFactory):
    """opa-py-wasm's factory with the compiled module from the cache and sized instances."""

    def __init__(self, wasm_bytes: bytes, *, max_memory_pages: int | None = None) -> None:
        if not wasm_bytes:
            raise opapywasm.OpaInvalidPolicyError("policy wasm is empty")
        self._max_memory_pages = max_memory_pages
        config = wasmtime.Config()
        config.epoch_interruption = True  # as the library's engine: per-eval deadlines
        self._engine = wasmtime.Engine(config)
        self._epoch = EpochTicker(self._engine)
        try:
            self._module = compiled_module(self._engine, wasm_bytes)
        except wasmtime.WasmtimeError as exc:
            raise opapywasm.OpaInvalidPolicyError(f"invalid policy wasm: {exc}") from exc
        self._validate_required_env_imports()
        self.initial_pages = data_pages(wasm_bytes)

    def create_runtime(self, builtin_dispatch: BuiltinDispatch | None = None) -> WasmtimeRuntime:
        pages = self.initial_pages
        floor = opapywasm.runtime._DEFAULT_MEMORY_PAGES
        if pages is None or pages <= floor:
            return super().create_runtime(builtin_dispatch)
        with _swapped(opapywasm.runtime, "_DEFAULT_MEMORY_PAGES", pages):
            return super().create_runtime(builtin_dispatch)


@contextmanager
def _swapped(module: object, name: str, value: object) -> Iterator[None]:
    with _HOOKS:
        saved = getattr(module, name)
        setattr(module, name, value)
        try:
            yield
        finally:
            setattr(module, name, saved)


def policy_from_wasm(wasm: bytes, config: PolicyConfig) -> OpaWasmPolicy:
    """OpaWasmPolicy(wasm, config), built on CachedRuntimeFactory."""
    with _swapped(opapywasm.policy, "WasmtimeRuntimeFactory", CachedRuntimeFactory):
        return OpaWasmPolicy(wasm, config)
