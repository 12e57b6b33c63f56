"""Bad input to the installed `checkpoint-runtime` command: a named one-line error, never a
traceback, and nothing created by a command that only reads.

Each case was a traceback (or a silent wrong answer) before: malformed YAML to `gate -f`, a
file store under /proc, a gs:// or s3:// URL without its filesystem installed, `inspect` of a
file or of a missing folder (which it used to create, with a lock file in it).
"""

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

COMMAND = Path(sys.executable).with_name("checkpoint-runtime")


def run_cli(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    completed = subprocess.run(
        [str(COMMAND), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(env),
    )
    return completed.returncode, completed.stdout, completed.stderr


def assert_one_clean_line(stderr: str) -> str:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    return lines[0]


def runtime_error_line(stderr: str) -> dict[str, str]:
    """`run` logs JSON lines; the last is the error, and nothing is a traceback."""
    assert "Traceback" not in stderr, stderr
    entries = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    assert entries[-1]["level"] == "error", stderr
    return entries[-1]  # type: ignore[no-any-return]


def write_config(path: Path, document: dict[str, object]) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_gate_on_malformed_yaml_is_a_named_error_exit_2(tmp_path: Path) -> None:
    values = tmp_path / "values.yaml"
    values.write_text("checkpoint:\n  collectors: [1,\n", encoding="utf-8")
    code, _, stderr = run_cli("gate", "-f", "values.yaml", cwd=tmp_path)
    assert code == 2
    line = assert_one_clean_line(stderr)
    assert line.startswith("error: ValuesFileError: values.yaml: not valid YAML at line ")


def test_gate_on_a_missing_values_file_is_a_named_error_exit_2(tmp_path: Path) -> None:
    code, _, stderr = run_cli("gate", "-f", "absent.yaml", cwd=tmp_path)
    assert code == 2
    assert assert_one_clean_line(stderr).startswith("error: ValuesFileError: absent.yaml: ")


def test_run_with_a_store_path_that_cannot_be_created_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "c.json", {"store": {"backend": "file", "path": "/proc/nope/store"}}
    )
    code, _, stderr = run_cli("run", "--config", str(config), cwd=tmp_path)
    assert code == 2
    entry = runtime_error_line(stderr)
    assert entry["key"] == "store.path"
    assert "file store folder /proc/nope/store" in entry["msg"]


def test_run_with_a_file_as_store_path_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    config = write_config(
        tmp_path / "c.json", {"store": {"backend": "file", "path": str(tmp_path / "file")}}
    )
    code, _, stderr = run_cli("run", "--config", str(config), cwd=tmp_path)
    assert code == 2
    assert "exists and is not a folder" in runtime_error_line(stderr)["msg"]


@pytest.mark.parametrize("url", ["gs://bucket/feed", "memory://feed", "/data/feed"])
def test_run_refuses_an_unsupported_url_scheme_naming_the_supported_ones(
    tmp_path: Path, url: str
) -> None:
    config = write_config(
        tmp_path / "c.json",
        {"collectors": [{"kind": "objectstore", "feed": "f", "url": url}]},
    )
    code, _, stderr = run_cli("run", "--check-config", "--config", str(config), cwd=tmp_path)
    assert code == 2
    entry = runtime_error_line(stderr)
    assert entry["key"] == "collectors[0].url"
    assert "file:///<folder> or s3://<bucket>/<prefix>" in entry["msg"]


def test_run_with_s3_but_without_the_s3_extra_says_which_extra_to_install(
    tmp_path: Path,
) -> None:
    # s3fs made unimportable exactly as when the extra is not installed, whatever this venv has.
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / "s3fs.py").write_text(
        "raise ModuleNotFoundError(\"No module named 's3fs'\", name='s3fs')\n"
    )
    path = os.pathsep.join(filter(None, [str(shadow), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    config = write_config(
        tmp_path / "c.json",
        {
            "store": {"backend": "file", "path": str(tmp_path / "store")},
            "collectors": [{"kind": "objectstore", "feed": "f", "url": "s3://bucket/feed"}],
        },
    )
    code, _, stderr = run_cli("run", "--config", str(config), cwd=tmp_path, env=env)
    assert code == 2
    entry = runtime_error_line(stderr)
    assert entry["key"] == "collectors[0].url"
    assert "pip install 'checkpoint-runtime[s3]'" in entry["msg"]
    assert not (tmp_path / "store").exists()  # refused before anything was opened


def test_run_with_an_unusable_kubeconfig_is_a_config_error(tmp_path: Path) -> None:
    config = write_config(tmp_path / "c.json", {"store": {"backend": "kubernetes"}})
    code, _, stderr = run_cli(
        "run", "--config", str(config), "--kubeconfig", str(tmp_path / "absent"), cwd=tmp_path
    )
    assert code == 2
    assert runtime_error_line(stderr)["key"] == "kubeconfig"


def test_inspect_of_a_file_says_there_is_no_store(tmp_path: Path) -> None:
    code, stdout, stderr = run_cli("inspect", "--path", "/etc/passwd", cwd=tmp_path)
    assert code == 2  # a named error
    assert stdout == ""
    line = assert_one_clean_line(stderr)
    assert line == "error: NoStoreError: no checkpoint store at /etc/passwd: it is not a folder"


def test_inspect_of_a_missing_folder_creates_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "does" / "not" / "exist"
    code, stdout, stderr = run_cli("inspect", "--path", str(missing), cwd=tmp_path)
    assert code == 2  # a named error
    assert stdout == ""
    assert assert_one_clean_line(stderr) == (
        f"error: NoStoreError: no checkpoint store at {missing}: the folder does not exist"
    )
    assert not (tmp_path / "does").exists()


def test_inspect_of_an_empty_folder_creates_no_lock_file_and_says_so(tmp_path: Path) -> None:
    code, _, stderr = run_cli("inspect", "--path", str(tmp_path), "--json", cwd=tmp_path)
    assert code == 2  # a named error
    assert "no store has checkpoint shards there" in assert_one_clean_line(stderr)
    assert list(tmp_path.iterdir()) == []  # not even .lock


def _file_store(folder: Path, lease: str, rows: dict[str, str]) -> None:
    store = Store.open(FileBackend(folder, lease), writer="w", epoch=1)
    store.batch(rows)
    store.flush()


def test_inspect_finds_the_one_store_in_a_folder_without_a_lease_name(tmp_path: Path) -> None:
    _file_store(tmp_path, "cr-checkpoint-runtime", {"tn/flowlogs/cursor": "c"})
    before = sorted(path.name for path in tmp_path.iterdir())
    code, stdout, stderr = run_cli("inspect", "--path", str(tmp_path), "--json", cwd=tmp_path)
    assert code == 0, stderr
    document = json.loads(stdout)
    assert document["shard_count"] == 1
    assert "store cr-checkpoint-runtime" in document["store"]
    assert sorted(path.name for path in tmp_path.iterdir()) == before


def test_inspect_lists_the_stores_it_finds_instead_of_showing_zero_shards(tmp_path: Path) -> None:
    _file_store(tmp_path, "alpha", {"tn/flowlogs/cursor": "c"})
    _file_store(tmp_path, "beta", {"tn/flowlogs/cursor": "c"})
    code, _, stderr = run_cli("inspect", "--path", str(tmp_path), cwd=tmp_path)
    assert code == 2  # a named error
    assert assert_one_clean_line(stderr) == (
        f"error: NoStoreError: no checkpoint store at {tmp_path}: it holds 2 stores "
        "(alpha, beta): choose one with --lease-name"
    )
    code, _, stderr = run_cli(
        "inspect", "--path", str(tmp_path), "--lease-name", "gamma", cwd=tmp_path
    )
    assert code == 2  # a named error
    assert assert_one_clean_line(stderr).endswith(
        "store 'gamma' has no shards (stores found there: alpha, beta)"
    )
    code, stdout, _ = run_cli(
        "inspect", "--path", str(tmp_path), "--lease-name", "beta", cwd=tmp_path
    )
    assert code == 0
    assert "1 shard(s)" in stdout


def test_run_refuses_an_identity_its_replicas_would_take_for_a_foreign_holder(
    tmp_path: Path,
) -> None:
    """A Lease holder that is not a candidate identity is named foreign by the other replicas
    (election/foreign.py): `run --identity` is held to the same shape before it starts."""
    config = {"store": {"backend": "file", "path": str(tmp_path / "cp")}, "collectors": []}
    path = write_config(tmp_path / "config.json", config)
    code, _, stderr = run_cli(
        "run", "--config", str(path), "--identity", "Beta Squatter", cwd=tmp_path
    )
    assert code == 2
    error = runtime_error_line(stderr)
    assert (error["error"], error["key"]) == ("UsageError", "--identity")
    assert "'Beta Squatter' is not a pod name" in error["msg"]
    assert not (tmp_path / "cp").exists()  # refused before the store was touched
