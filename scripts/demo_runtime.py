"""The main job, end to end on a local API server: install the chart, run two runtimes, fail over.

1. builds (or reuses) kube-apiserver, etcd and helm, and starts them on loopback;
2. `helm install`s the chart with one object-store feed pointing at a generated folder;
3. runs two `checkpoint-runtime run` processes with the config the chart rendered and the chart
   ServiceAccount's token (exactly a pod's permissions), with client-go's default timings;
4. feeds the folder, prints `checkpoint-runtime inspect` and key metrics;
5. stops the leader (SIGTERM: flush + release; `--kill` for SIGKILL: lease expiry), shows the
   other take over, feeds more objects and shows that nothing was emitted twice.

Usage: python scripts/demo_runtime.py [--objects N] [--kill] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from checkpoint_testenv import binaries, helm
from checkpoint_testenv.controlplane import ControlPlane, free_port, start_control_plane

FEED = {"kind": "objectstore", "tailnet": "demo", "feed": "access-logs", "pollSeconds": 1}
SHARD = "demo/objectstore/access-logs"
METRICS = (
    ("checkpoint_leader", ""),
    ("checkpoint_leader_epoch", ""),
    ("checkpoint_shards", ""),
    ("checkpoint_shard_rows", f'shard="{SHARD}"'),
    ("checkpoint_shard_compressed_bytes", f'shard="{SHARD}"'),
    ("checkpoint_shard_compression_ratio", f'shard="{SHARD}"'),
    ("checkpoint_shard_headroom_ratio", f'shard="{SHARD}"'),
    ("checkpoint_writes_total", f'shard="{SHARD}"'),
    ("checkpoint_conflicts_total", f'shard="{SHARD}"'),
    ("checkpoint_collector_records_total", f'collector="{SHARD}"'),
)


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> float:
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout:
            raise SystemExit(f"demo: {what} did not happen within {timeout:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - started


def generate_objects(folder: Path, start: int, count: int) -> list[str]:
    """Access-log objects under a date prefix, three JSON records each."""
    names = []
    for index in range(start, start + count):
        name = f"2026/03/01/{index // 60:02d}/access-{index:05d}.json"
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [
            {"object": index, "line": line, "status": 200 + line, "bytes": 512 * line}
            for line in range(3)
        ]
        path.write_text("".join(json.dumps(entry) + "\n" for entry in lines))
        names.append(name)
    return names


class Runtime:
    """One `checkpoint-runtime run` process; records to a file, JSON logs to another."""

    def __init__(self, name: str, workdir: Path, config: Path, kubeconfig: Path) -> None:
        self.name = name
        self.port = free_port()
        self.records = workdir / f"{name}.records.jsonl"
        self.log = workdir / f"{name}.log"
        argv = [
            sys.executable, "-m", "checkpoint_runtime.cli", "run", "--config", str(config),
            "--kubeconfig", str(kubeconfig), "--identity", name, "--http-port", str(self.port),
        ]  # fmt: skip
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        with open(self.records, "wb") as out, open(self.log, "wb") as err:
            self.process = subprocess.Popen(argv, stdout=out, stderr=err, env=env)

    def metric(self, name: str, labels: str = "") -> float | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
                body = r.read().decode()
        except OSError:
            return None
        wanted = f"{name}{{{labels}}}" if labels else name
        for line in body.splitlines():
            if line.startswith(wanted + " "):
                return float(line.rsplit(" ", 1)[1])
        return None

    def leading(self) -> bool:
        return self.metric("checkpoint_leader") == 1.0

    def objects(self) -> list[str]:
        if not self.records.exists():
            return []
        found = []
        for line in self.records.read_text().splitlines():
            record = json.loads(line)
            if record.get("line") == 0:
                found.append(record["object"])
        return found

    def stop(self, sig: signal.Signals = signal.SIGTERM) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        return self.process.wait(60)


def write_kubeconfig(path: Path, plane: ControlPlane, token: str) -> Path:
    cluster = {"server": plane.host, "certificate-authority": str(plane.ca_file)}
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "demo", "cluster": cluster}],
        "users": [{"name": "chart-sa", "user": {"token": token}}],
        "contexts": [{"name": "demo", "context": {"cluster": "demo", "user": "chart-sa"}}],
        "current-context": "demo",
    }
    path.write_text(yaml.safe_dump(document))
    return path


def inspect(config: Path, kubeconfig: Path) -> None:
    subprocess.run(
        [sys.executable, "-m", "checkpoint_runtime.cli", "inspect", "--config", str(config),
         "--kubeconfig", str(kubeconfig)],
        check=True,
    )  # fmt: skip


def print_metrics(runtime: Runtime) -> None:
    print(f"metrics of {runtime.name} (http://127.0.0.1:{runtime.port}/metrics):")
    for name, labels in METRICS:
        value = runtime.metric(name, labels)
        if value is None:  # a labelled counter appears with its first increment
            value = 0.0
        shown = f"{value:g}"
        print(f"  {name:<40} {shown}")


def run_demo(args: argparse.Namespace, workdir: Path) -> int:
    say("test environment: kube-apiserver + etcd + helm from the pinned Go modules")
    plane = start_control_plane(binaries.locate(), workdir / "controlplane")
    runtimes: list[Runtime] = []
    try:
        print(f"API server {plane.host} up in {plane.startup_total:.1f} s")
        bucket = workdir / "bucket"
        bucket.mkdir()
        namespace = plane.create_namespace("demo")
        say(f"helm install cr charts/checkpoint-runtime --namespace {namespace}")
        values: dict[str, Any] = {
            "checkpoint": {"collectors": [{**FEED, "url": f"file://{bucket}"}]},
        }
        release = helm.install(plane, namespace, values)
        config = workdir / "config.json"
        config.write_text(json.dumps(release.rendered_config, indent=2))
        print("runtime config the chart rendered (its ConfigMap's config.json):")
        print(json.dumps(release.rendered_config, indent=2))
        kubeconfig = write_kubeconfig(workdir / "sa.kubeconfig", plane, release.token)
        print(f"credentials: ServiceAccount {namespace}/{release.service_account} (TokenRequest)")

        say("two runtimes with the chart's config and RBAC")
        runtimes = [
            Runtime(name, workdir, config, kubeconfig) for name in ("runtime-a", "runtime-b")
        ]
        wait_for(lambda: any(r.leading() for r in runtimes), 30, "a leader")
        leader = next(r for r in runtimes if r.leading())
        standby = next(r for r in runtimes if r is not leader)
        print(f"leader: {leader.name}; standby: {standby.name}")

        say(f"feeding {args.objects} objects into {bucket}")
        first = generate_objects(bucket, 0, args.objects)
        wait_for(lambda: len(leader.objects()) >= len(first), 120, "the leader emitting them")
        time.sleep(1.5)  # let the debounced persist settle
        print(f"{leader.name} emitted {len(leader.objects())} objects ({3 * len(first)} records)")
        inspect(config, kubeconfig)
        print_metrics(leader)

        how = signal.SIGKILL if args.kill else signal.SIGTERM
        say(f"stopping the leader {leader.name} with {how.name}")
        stopped_at = time.monotonic()
        code = leader.stop(how)
        wait_for(standby.leading, 60, "the standby taking over")
        took = time.monotonic() - stopped_at
        print(f"{leader.name} exited {code}; {standby.name} leads after {took:.1f} s")

        say("feeding 25 more objects")
        second = generate_objects(bucket, args.objects, 25)
        wait_for(lambda: len(standby.objects()) >= len(second), 60, "the new leader emitting")
        time.sleep(1.5)
        again = sorted(set(standby.objects()) & set(leader.objects()))
        print(
            f"{standby.name} emitted {len(standby.objects())} objects; emitted by both: "
            f"{len(again)}; total distinct {len(set(standby.objects()) | set(leader.objects()))}"
            f" of {len(first) + len(second)}"
        )
        inspect(config, kubeconfig)
        print_metrics(standby)
        say(f"SIGTERM {standby.name}: stop collectors, flush, release the Lease")
        print(f"{standby.name} exited {standby.stop()}")
        return 0 if not again else 1
    finally:
        for runtime in runtimes:
            if runtime.process.poll() is None:
                runtime.process.kill()
        plane.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=300, help="objects in the first feed")
    parser.add_argument("--kill", action="store_true", help="SIGKILL the leader (lease expiry)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="checkpoint-demo-"))
    try:
        return run_demo(args, workdir)
    finally:
        if args.keep:
            print(f"\nwork folder kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
