"""The runtime's startup check: everything `run` refuses before it touches the API (exit 2).

One function, used by `run` itself and by the render gate on the config.json the chart renders,
so the gate can never pass a config the pods would then refuse in a crash loop: the schema and
the rules a schema cannot express (settings.parse), then the per-shard size projection.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from checkpoint_runtime.errors import ConfigError, StorePathError, quote
from checkpoint_runtime.runtime import projection
from checkpoint_runtime.runtime.projection import ShardProjection
from checkpoint_runtime.runtime.settings import RuntimeSettings, parse


def check(document: dict[str, Any]) -> tuple[RuntimeSettings, list[ShardProjection]]:
    """The settings and every shard's projection, or ConfigError naming the config key."""
    settings = parse(document)
    return settings, projection.check(settings)


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
