"""`checkpoint-runtime run` as a real subprocess, observed through its HTTP port and its sink.

Also what such a process reads and leaves behind: object-store objects in a folder, the records
of a file sink, the Prometheus text of `/metrics`, the seen-ids of a stored shard.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.constants import DEFAULT_STORE_NAME
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.controlplane import free_port
from checkpoint_testenv.support.bytecode import child_env
from checkpoint_testenv.support.polling import wait_for

if TYPE_CHECKING:
    from checkpoint_testenv.helm import Release

FAST_ELECTION = {"leaseDurationSeconds": 3, "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5}
"""`leaderElection` settings under which a takeover in a test takes seconds, not a minute."""


def metric_value(body: str, name: str, labels: str = "") -> float | None:
    """The value of series `name{labels}` in a Prometheus text body; None if absent."""
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in body.splitlines():
        if line.startswith(wanted + " "):
            return float(line.rsplit(" ", 1)[1])
    return None


def http_get(port: int, path: str) -> tuple[int, str]:
    """GET a runtime's HTTP port on 127.0.0.1: status and body (0 and "" while it is down)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def port_metric(port: int, name: str, labels: str = "") -> float | None:
    """Series `name{labels}` of the runtime serving /metrics on `port`; None if absent."""
    status, body = http_get(port, "/metrics")
    return metric_value(body, name, labels) if status == 200 else None


def exported_series_names(body: str) -> set[str]:
    """The series names a Prometheus text body declares: every `# TYPE` family with the names
    its samples carry (a histogram's `_bucket`, `_count`, `_sum`), whether or not a labelled
    family has samples yet."""
    suffixes = {"histogram": ("_bucket", "_count", "_sum"), "summary": ("_count", "_sum")}
    names: set[str] = set()
    for line in body.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            names.add(name)
            names.update(name + suffix for suffix in suffixes.get(kind.strip(), ()))
    return names


def sink_records(path: Path) -> list[dict[str, Any]]:
    """Every record a file sink (JSON lines) holds so far."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line]


def log_entries(text: str) -> list[dict[str, Any]]:
    """The runtime's JSON log lines (other lines kept as {"msg": line})."""
    entries = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            entry = {"msg": line}
        entries.append(entry if isinstance(entry, dict) else {"msg": line})
    return entries


def first_lines(records: list[dict[str, Any]]) -> list[str]:
    """The objects an object-store collector emitted, one per object (its line 0)."""
    return [r["object"] for r in records if r.get("line") == 0]


def runtime_config(
    release: Release, bucket: Path, flowlogs_url: str | None = None, **store: Any
) -> dict[str, Any]:
    """A release's rendered config as a test runs it: the API-server store with a short
    debounce, `FAST_ELECTION`, an object-store collector on folder `bucket` (shard
    `tn1/objectstore/feed-a`) and, given a URL, a flowlogs collector (`tn1/flowlogs`)."""
    config: dict[str, Any] = json.loads(json.dumps(release.rendered_config))
    assert config["store"]["backend"] == "kubernetes"
    config["store"].update({"debounceSeconds": 0.2, **store})
    config["leaderElection"].update(FAST_ELECTION)
    config["collectors"] = [
        {
            "kind": "objectstore",
            "tailnet": "tn1",
            "feed": "feed-a",
            "url": bucket.as_uri(),
            "pollSeconds": 0.3,
            "maxSeenKeys": 5000,
        }
    ]
    if flowlogs_url:
        config["collectors"].append(
            {"kind": "flowlogs", "tailnet": "tn1", "url": flowlogs_url, "pollSeconds": 0.3}
        )
    return config


def write_objects(bucket: Path, names: list[str]) -> None:
    """Objects of two JSON lines each under `bucket` (a file:// feed of the object-store kind)."""
    for name in names:
        path = bucket / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"object": name, "n": 1}) + "\n" + json.dumps({"n": 2}) + "\n")


class RuntimeProcess:
    """One runtime process with its own config file, sink file and stderr log."""

    def __init__(
        self,
        workdir: Path,
        name: str,
        config: dict[str, Any] | None,
        kubeconfig: Path | None = None,
        extra_args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.name = name
        self.port = free_port()
        self.sink = workdir / f"{name}.records.jsonl"
        self.stderr_path = workdir / f"{name}.log"
        self.config_path: Path | None = None
        if config is not None:
            config = json.loads(json.dumps(config))
            config["http"] = {"port": self.port, "bindAddress": "127.0.0.1"}
            config["sink"] = {"kind": "file", "path": str(self.sink)}
            self.config_path = workdir / f"{name}.config.json"
            self.config_path.write_text(json.dumps(config, indent=2))
        self.kubeconfig = kubeconfig
        self.extra_args = extra_args
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> RuntimeProcess:
        argv = [sys.executable, "-m", "checkpoint_runtime.cli", "run", "--identity", self.name]
        if self.config_path is not None:
            argv += ["--config", str(self.config_path)]
        else:
            argv += ["--http-port", str(self.port)]
        if self.kubeconfig is not None:
            argv += ["--kubeconfig", str(self.kubeconfig)]
        argv += list(self.extra_args)
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "POD_NAME")}
        env = child_env(env) | self.env
        with open(self.stderr_path, "ab") as stderr:
            self.process = subprocess.Popen(
                argv, stdout=subprocess.DEVNULL, stderr=stderr, env=env, cwd=self.workdir
            )
        return self

    # ---- observation ------------------------------------------------------------------------

    def get(self, path: str) -> tuple[int, str]:
        return http_get(self.port, path)

    def metric(self, name: str, labels: str = "") -> float | None:
        return port_metric(self.port, name, labels)

    def leading(self) -> bool:
        return self.metric("checkpoint_leader") == 1.0

    def records(self) -> list[dict[str, Any]]:
        return sink_records(self.sink)

    def objects(self) -> list[str]:
        return first_lines(self.records())

    def flow_numbers(self) -> list[int]:
        return [r["record"]["n"] for r in self.records() if r.get("collector") == "flowlogs"]

    def logs(self) -> list[dict[str, Any]]:
        if not self.stderr_path.exists():
            return []
        return log_entries(self.stderr_path.read_text())

    # ---- control ----------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def wait_ready(self, timeout: float = 20) -> None:
        wait_for(lambda: self.get("/readyz")[0] == 200 or not self.running, timeout, "ready")
        if not self.running:
            raise AssertionError(f"{self.name} exited: {self.stderr_path.read_text()}")

    def terminate(self, timeout: float = 30) -> int:
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait(10)

    def wait_exit(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def stop_quietly(self) -> None:
        if self.running:
            assert self.process is not None
            self.process.kill()
            self.process.wait(10)


def seen_ids(rows: dict[str, str], shard: str) -> set[str]:
    """The object ids a collector's shard marks as seen."""
    prefix = f"{shard}/seen/"
    return {key[len(prefix) :] for key in rows if key.startswith(prefix)}


def stored_rows(where: Path | Release, name: str = DEFAULT_STORE_NAME) -> dict[str, str]:
    """Every row a runtime left: in the file store in folder `where`, or in a release's
    ConfigMap shards (read as admin, never migrating)."""
    if isinstance(where, Path):
        return dict(Store.open(FileBackend(where, name), writer="reader").items(""))
    backend = KubernetesBackend(
        where.plane.configuration(), where.coordination_namespace, where.lease_name
    )
    try:
        return dict(Store.open(backend, writer="test-reader", migrate=False).items(""))
    finally:
        backend.close()
