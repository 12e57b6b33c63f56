"""The installed `checkpoint-runtime`: help, version, a file-store run that restarts from its
checkpoints, inspect, project, and the gate from another working directory."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
import tomllib
import zipfile
from pathlib import Path
from typing import Any

import pytest
from installed_helpers import REPO_ROOT, Venv, clean_env

from checkpoint_testenv.s3server import S3Server
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import first_lines, port_metric, sink_records

pytestmark = pytest.mark.installed

RUNTIME_COMMANDS = ("run", "inspect", "project", "migrate")
POLLS = 'collector="objectstore/f1"'
PROJECT_VERSION = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_wheel_ships_the_package_data_and_not_the_test_environment(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    data = "checkpoint_runtime/data/"
    for needed in (
        "schemas/runtime-config.schema.json",
        "chart/Chart.yaml",
        "chart/values.schema.json",
        "chart/templates/deployment.yaml",
        "policy/rbac.rego",
        "ci/default-values.yaml",
    ):
        assert data + needed in names
    assert not [name for name in names if name.startswith("checkpoint_testenv")]


def test_the_runtime_install_has_neither_the_gate_nor_the_dev_packages(
    runtime_venv: Venv, elsewhere: Path
) -> None:
    listed = subprocess.run(
        [str(runtime_venv.python), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        env=clean_env(),
    )
    installed = {package["name"].lower() for package in json.loads(listed.stdout)}
    assert "checkpoint-runtime" in installed
    assert not installed & {
        "opa-py-wasm",
        "wasmtime",
        "helm-python-sdk",
        "kubernetes-validate",
        "pytest",
        "s3fs",
    }
    probe = subprocess.run(
        [str(runtime_venv.python), "-c", "import checkpoint_testenv"],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=clean_env(),
        check=False,
    )
    assert "No module named 'checkpoint_testenv'" in probe.stderr


@pytest.mark.parametrize("command", ["", *RUNTIME_COMMANDS])
def test_help_of_every_runtime_command(runtime_venv: Venv, elsewhere: Path, command: str) -> None:
    result = runtime_venv.run(*([command] if command else []), "--help", cwd=elsewhere)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: checkpoint-runtime {command}".rstrip())
    assert result.stderr == ""


def test_version(runtime_venv: Venv, elsewhere: Path) -> None:
    result = runtime_venv.run("--version", cwd=elsewhere)
    assert (result.returncode, result.stdout) == (0, f"checkpoint-runtime {PROJECT_VERSION}\n")


def test_the_gate_without_its_extra_names_the_extra_to_install(
    runtime_venv: Venv, elsewhere: Path
) -> None:
    result = runtime_venv.run("gate", "--help", cwd=elsewhere)
    assert result.returncode == 2
    assert result.stderr.startswith("error: MissingExtraError: `checkpoint-runtime gate` (module")
    assert "needs the 'gate' extra" in result.stderr
    assert result.stderr.endswith("pip install 'checkpoint-runtime[gate]'\n")
    assert "Traceback" not in result.stderr


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def write_config(folder: Path, sink: Path) -> Path:
    config = {
        "store": {"backend": "file", "path": str(folder / "checkpoints")},
        "collectors": [
            {
                "kind": "objectstore",
                "feed": "f1",
                "url": (folder / "bucket").as_uri(),
                "pollSeconds": 0.2,
            }
        ],
        "http": {"port": free_port(), "bindAddress": "127.0.0.1"},
        "sink": {"kind": "file", "path": str(sink)},
    }
    path = folder / f"{sink.stem}.config.json"
    path.write_text(json.dumps(config))
    return path


def emitted_objects(sink: Path) -> list[str]:
    return first_lines(sink_records(sink))


def run_until(
    venv: Venv,
    config: Path,
    cwd: Path,
    sink: Path,
    expected: list[str],
    env: dict[str, str] | None = None,
) -> str:
    """Start `run` (with `env` added to a clean environment), wait until the sink holds exactly
    `expected` and still does after five more polls, then SIGTERM it (a clean exit flushes the
    checkpoints); return its log."""
    log_path = sink.with_suffix(".log")
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [str(venv.cli), "run", "--config", str(config)],
            cwd=cwd,
            env={**clean_env(), **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        deadline = time.monotonic() + 60
        while emitted_objects(sink) != expected and process.poll() is None:
            assert time.monotonic() < deadline, f"{expected} not emitted:\n{log_path.read_text()}"
            time.sleep(0.1)
        assert process.poll() is None, f"run exited early:\n{log_path.read_text()}"
        port = json.loads(config.read_text())["http"]["port"]

        def polls() -> float:
            return port_metric(port, "checkpoint_collector_polls_total", POLLS) or 0.0

        seen = polls()
        wait_for(lambda: polls() >= seen + 5, 60, "five more polls")
        assert emitted_objects(sink) == expected  # nothing else (nothing already seen) emitted
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, log_path.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return log_path.read_text()


def json_output(venv: Venv, cwd: Path, *args: str | Path) -> Any:
    result = venv.run(*args, "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_file_store_run_checkpoints_and_a_restart_continues_from_them(
    runtime_venv: Venv, tmp_path: Path, elsewhere: Path
) -> None:
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    for name in ("obj-1.json", "obj-2.json", "obj-3.json"):
        (bucket / name).write_text('{"n": 1}\n')
    first_sink = tmp_path / "first.jsonl"
    first_log = run_until(
        runtime_venv,
        write_config(tmp_path, first_sink),
        elsewhere,
        first_sink,
        ["obj-1.json", "obj-2.json", "obj-3.json"],
    )
    assert '"msg":"flushed"' in first_log

    config = write_config(tmp_path, tmp_path / "inspect.jsonl")
    stored = json_output(runtime_venv, elsewhere, "inspect", "--config", config)
    assert [shard["shard"] for shard in stored["shards"]] == ["objectstore/f1"]
    assert stored["shards"][0]["rows"] > 0

    # The second lifecycle reads the checkpoints: only the new object is emitted.
    (bucket / "obj-4.json").write_text('{"n": 1}\n')
    second_sink = tmp_path / "second.jsonl"
    run_until(
        runtime_venv, write_config(tmp_path, second_sink), elsewhere, second_sink, ["obj-4.json"]
    )


def test_project_a_config(runtime_venv: Venv, tmp_path: Path, elsewhere: Path) -> None:
    config = write_config(tmp_path, tmp_path / "sink.jsonl")
    projected = json_output(runtime_venv, elsewhere, "project", "--config", config)
    (shard,) = projected["shards"]
    assert (shard["shard"], shard["knob"], shard["fits"]) == (
        "objectstore/f1",
        "collectors[0].maxSeenKeys",
        True,
    )


def test_the_gate_extra_gates_a_values_file_relative_to_another_directory(
    gate_venv: Venv, elsewhere: Path
) -> None:
    (elsewhere / "values.yaml").write_text("replicaCount: 2\n")
    result = gate_venv.run("gate", "-f", "values.yaml", cwd=elsewhere)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PASS: 0 deny" in result.stdout
    assert "gate: 1 of 1 values documents pass" in result.stdout


def test_the_gate_extra_denies_what_its_policies_deny(gate_venv: Venv, elsewhere: Path) -> None:
    (elsewhere / "values.yaml").write_text("podSecurityContext:\n  runAsUser: 0\n")
    result = gate_venv.run("gate", "-f", "values.yaml", cwd=elsewhere)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "DENIED" in result.stdout


def test_the_s3_extra_resolves_and_gives_s3_urls(s3_venv: Venv, elsewhere: Path) -> None:
    probe = subprocess.run(
        [
            str(s3_venv.python),
            "-c",
            "import fsspec; print(type(fsspec.filesystem('s3', anon=True)).__name__)",
        ],
        capture_output=True,
        text=True,
        cwd=elsewhere,
        env=clean_env(),
        check=False,
    )
    assert probe.stdout.strip() == "S3FileSystem", probe.stderr
    check = subprocess.run(
        [str(s3_venv.python), "-m", "pip", "check"], capture_output=True, text=True, check=False
    )
    assert check.returncode == 0, check.stdout
    assert s3_venv.run("--version", cwd=elsewhere).returncode == 0


def test_the_s3_extra_reads_a_real_s3_server_and_continues_from_its_checkpoints(
    s3_venv: Venv, s3_server: S3Server, s3_bucket: str, tmp_path: Path, elsewhere: Path
) -> None:
    """The installed wheel with [s3] against SeaweedFS: credentials from the environment, the
    endpoint from `endpointUrl`; a restart emits only what is new."""

    def config(sink: Path) -> Path:
        path = write_config(tmp_path, sink)
        document = json.loads(path.read_text())
        document["collectors"] = [
            {
                "kind": "objectstore",
                "feed": "f1",
                "url": f"s3://{s3_bucket}/feed",
                "endpointUrl": s3_server.endpoint,
                "pollSeconds": 0.2,
            }
        ]
        path.write_text(json.dumps(document))
        return path

    first = [f"2026/12/obj-{index}.json" for index in range(3)]
    s3_server.put_many(s3_bucket, [(f"feed/{name}", b'{"n": 1}\n') for name in first])
    sink = tmp_path / "s3-first.jsonl"
    log = run_until(s3_venv, config(sink), elsewhere, sink, first, env=s3_server.env())
    assert '"msg":"flushed"' in log
    s3_server.put(s3_bucket, "feed/2026/12/obj-3.json", b'{"n": 1}\n')
    sink = tmp_path / "s3-second.jsonl"
    run_until(s3_venv, config(sink), elsewhere, sink, ["2026/12/obj-3.json"], env=s3_server.env())
