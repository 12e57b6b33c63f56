"""One bytecode cache for the Python child processes of a test run.

A test starts many Python processes (`checkpoint-runtime run`, its CLI, probes). Each compiles
every module it imports unless bytecode is cached, and none is where PYTHONDONTWRITEBYTECODE is
set (as on this project's machines) or the source tree holds no `__pycache__`: the Kubernetes
client alone is ~1 CPU s of compiling, in every process. `child_env` gives a child a cache of
its own test process (PYTHONPYCACHEPREFIX, a temporary folder removed at exit): the first child
compiles a module, the later ones read it. Nothing is shared between two test runs, and what
runs is the same source (a cached file is used only while the source's mtime and size match).
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

PREFIX_ENV = "PYTHONPYCACHEPREFIX"
NO_WRITE_ENV = "PYTHONDONTWRITEBYTECODE"


@functools.cache
def cache_folder() -> Path:
    """This process's bytecode folder for its children (made on first use, removed at exit)."""
    folder = Path(tempfile.mkdtemp(prefix="checkpoint-pycache-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def child_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """`base` (default: this process's environment) for a Python child process, with its
    bytecode written to and read from `cache_folder()`."""
    env = dict(os.environ if base is None else base)
    env.pop(NO_WRITE_ENV, None)
    env[PREFIX_ENV] = str(cache_folder())
    return env
