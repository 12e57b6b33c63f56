"""The runtime's startup check: everything `run` refuses before it touches the API (exit 2).

One function, used by `run` itself and by the render gate on the config.json the chart renders,
so the gate can never pass a config the pods would then refuse in a crash loop: the schema and
the rules a schema cannot express (settings.parse), then the per-shard size projection, then
the memory projection against the container's memory limit (`run` reads it from its cgroup,
`container_memory_limit`; the gate from the rendered Deployment).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from checkpoint_runtime.constants import CGROUP_ROOT, CGROUP_SELF, CGROUP_UNLIMITED_BYTES
from checkpoint_runtime.errors import ConfigError, StorePathError, quote
from checkpoint_runtime.runtime import projection, rolesize
from checkpoint_runtime.runtime.projection import ShardProjection
from checkpoint_runtime.runtime.settings import RuntimeSettings, parse


def check(
    document: dict[str, Any], memory_limit: int | None = None
) -> tuple[RuntimeSettings, list[ShardProjection]]:
    """The settings and every shard's projection, or ConfigError naming the config key
    (MemoryLimitError when `memory_limit`, the container's limit in bytes, is below the memory
    projection; None: no limit, nothing to check)."""
    settings = parse(document)
    rolesize.check(settings)
    projections = projection.check(settings)
    projection.check_memory(projections, memory_limit)
    return settings, projections


# Where `container_memory_limit` looks (module attributes, so a test can point them elsewhere).
CGROUP = Path(CGROUP_ROOT)
SELF_CGROUP = Path(CGROUP_SELF)


def container_memory_limit(root: Path | None = None, self_cgroup: Path | None = None) -> int | None:
    """This process's memory limit in bytes from its cgroup, or None (unlimited, or no cgroup
    memory controller to read: nothing to check).

    cgroup v2: `memory.max` ("max": unlimited); v1: `memory/memory.limit_in_bytes` (from
    CGROUP_UNLIMITED_BYTES up: unlimited). Read in the process's own cgroup (its path in
    /proc/self/cgroup) when that is visible under the mount, and at the mount's root (what a
    container with its own cgroup namespace sees as its own); the smallest limit found counts.
    """
    root = CGROUP if root is None else root
    self_cgroup = SELF_CGROUP if self_cgroup is None else self_cgroup
    own_v2, own_v1 = "", ""
    try:
        lines = self_cgroup.read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            own_v2 = path.strip("/")
        elif "memory" in controllers.split(","):
            own_v1 = path.strip("/")
    candidates = [root / own_v2 / "memory.max", root / "memory.max"]
    candidates += [
        root / "memory" / own_v1 / "memory.limit_in_bytes",
        root / "memory" / "memory.limit_in_bytes",
    ]
    limits = [limit for path in candidates if (limit := _read_limit(path)) is not None]
    return min(limits, default=None)


def _read_limit(path: Path) -> int | None:
    """The limit one cgroup file states, None for no limit (absent, "max", unreadable)."""
    try:
        text = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isdigit():
        return None  # "max" (v2's unlimited)
    value = int(text)
    return value if value < CGROUP_UNLIMITED_BYTES else None


# Virtual filesystems: a folder there can look writable (to root) but holds no files.
VIRTUAL_ROOTS = (Path("/proc"), Path("/sys"), Path("/dev"))


def check_paths(settings: RuntimeSettings) -> None:
    """The file store's folder and the file sink's path can be used, checked without creating
    anything (what opening them would refuse later, after the API or the store was touched)."""
    store = settings.store
    if store.backend == "file" and store.path:
        problem = _folder_problem(Path(store.path))
        if problem:
            raise StorePathError("store.path", store.path, problem)
    if settings.sink_kind == "file" and settings.sink_path:
        sink = Path(settings.sink_path)
        problem = "is a folder, not a file" if sink.is_dir() else _folder_problem(sink.parent)
        if problem:
            raise ConfigError("sink.path", f"{quote(settings.sink_path)}: {problem}")


def _folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot be used (or created) as a folder of files, or None."""
    absolute = Path(os.path.abspath(folder))
    if any(absolute == root or root in absolute.parents for root in VIRTUAL_ROOTS):
        return f"is on a virtual filesystem ({absolute.parts[1]}), not a folder for files"
    existing = absolute
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        what = "exists and is not a folder" if existing == absolute else f"{existing} is a file"
        return what
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable by this user (uid {os.getuid()})"
    return None
