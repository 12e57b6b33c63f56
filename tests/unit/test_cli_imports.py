"""What each command imports: only what it uses. A file-store command never loads the
Kubernetes client, the gate's engine or fsspec; `project` and `run --check-config` not the
store's Prometheus series either. Asserted on the import graph of a real subprocess (the time
it saves is measured by scripts/bench/cli.py, never here)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.bytecode import child_env

# Top-level packages a file-store command must not import, and the commands that also must not
# import the store's metrics.
NEVER = ("kubernetes", "urllib3", "fsspec", "opapywasm", "wasmtime", "helm_python", "yaml")
NO_STORE = ("prometheus_client", "checkpoint_runtime.store.core")

PROBE = """
import json, sys
from checkpoint_runtime import cli
try:
    code = cli.main(sys.argv[1:])
except SystemExit as exit_:
    code = exit_.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


@pytest.fixture
def file_store(tmp_path: Path) -> tuple[Path, Path]:
    """A file store holding one shard, and a runtime config naming it (file:// feed)."""
    folder = tmp_path / "store"
    store = Store.open(FileBackend(folder, "cr"), writer="test", migrate=False)
    store.batch({"objectstore/f1/cursor": "a"})
    store.flush()
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    config = tmp_path / "config.json"
    document = {
        "store": {"backend": "file", "path": str(folder), "leaseName": "cr"},
        "collectors": [{"kind": "objectstore", "feed": "f1", "url": bucket.as_uri()}],
    }
    config.write_text(json.dumps(document))
    return folder, config


def loaded(args: list[str], cache: Path) -> tuple[int, set[str]]:
    env = child_env({**os.environ, "XDG_CACHE_HOME": str(cache)})
    result = subprocess.run(
        [sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, check=False
    )
    report = json.loads(result.stderr.strip().splitlines()[-1])
    return report["code"], set(report["modules"])


def heavy(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return sorted(m for m in modules if any(m == n or m.startswith(f"{n}.") for n in names))


@pytest.mark.parametrize("command", ["project", "run --check-config", "inspect"])
def test_a_file_store_command_imports_no_kubernetes_client(
    command: str, file_store: tuple[Path, Path], tmp_path: Path
) -> None:
    folder, config = file_store
    args = {
        "project": ["project", "--config", str(config)],
        "run --check-config": ["run", "--check-config", "--config", str(config)],
        "inspect": ["inspect", "--path", str(folder)],
    }[command]
    code, modules = loaded(args, tmp_path / "cache")
    assert code == 0
    assert heavy(modules, NEVER) == []
    if command != "inspect":  # inspect opens the store, which keeps its series
        assert heavy(modules, NO_STORE) == []
    else:  # and reads no runtime config: no schema validator, no projection
        assert heavy(modules, ("jsonschema", "checkpoint_runtime.runtime.projection")) == []


def test_the_kubernetes_store_still_loads_its_client(tmp_path: Path) -> None:
    """The other side of the lazy import: a cluster store imports the client when it is used
    (a kubeconfig that does not exist is then a named error, exit 2)."""
    missing = tmp_path / "no-kubeconfig"
    args = ["inspect", "--namespace", "ns", "--kubeconfig", str(missing)]
    code, modules = loaded(args, tmp_path / "cache")
    assert code == 2
    assert "kubernetes" in modules


OPEN_FILE_STORE = """
import json, sys
from checkpoint_runtime.runtime.lifecycle import Runtime
from checkpoint_runtime.runtime.settings import parse
store = {"backend": "file", "path": sys.argv[1], "leaseName": "cr"}
runtime = Runtime(parse({"store": store, "leaderElection": {"enabled": False}}), identity="me")
backend, lease = runtime._open_backend()
backend.close()
print(json.dumps({"lease": lease, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def test_the_runtime_opens_a_file_store_without_the_kubernetes_client(tmp_path: Path) -> None:
    """The process's own way in: the etcd-space gate lives with the Kubernetes backend, so the
    lifecycle builds one only for a kubernetes store."""
    folder = tmp_path / "store"
    result = subprocess.run(
        [sys.executable, "-c", OPEN_FILE_STORE, str(folder)],
        capture_output=True,
        text=True,
        env=child_env(),
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stderr.strip().splitlines()[-1])
    assert report["lease"] is None
    assert heavy(set(report["modules"]), NEVER) == []
