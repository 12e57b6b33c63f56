"""`checkpoint-runtime run` as a subprocess on the file store: config errors, flush, restarts."""

from __future__ import annotations

import http.client
import socket
from pathlib import Path
from typing import Any

import pytest

from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import RuntimeProcess, stored_rows, write_objects


def file_config(tmp_path: Path, **store: Any) -> dict[str, Any]:
    bucket = tmp_path / "bucket"
    bucket.mkdir(exist_ok=True)
    return {
        "store": {"backend": "file", "path": str(tmp_path / "cp"), **store},
        "collectors": [
            {"kind": "objectstore", "feed": "f1", "url": bucket.as_uri(), "pollSeconds": 0.2}
        ],
    }


def healthz_status(host: str, port: int) -> int | None:
    """GET /healthz on exactly this address (no proxy, no name lookup); None if refused."""
    connection = http.client.HTTPConnection(host, port, timeout=2)
    try:
        connection.request("GET", "/healthz")
        return connection.getresponse().status
    except OSError:
        return None
    finally:
        connection.close()


def test_a_bad_config_names_the_key_and_exits_2_before_touching_anything(
    tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    config = file_config(tmp_path)
    config["collectors"][0]["feed"] = "Not_Valid"
    proc = RuntimeProcess(tmp_path, "bad", config)
    procs.append(proc.start())
    assert proc.wait_exit(20) == 2
    errors = [e for e in proc.logs() if e.get("level") == "error"]
    assert errors
    assert errors[0]["key"] == "collectors[0].feed"
    assert not (tmp_path / "cp").exists()


def test_impossible_election_timings_are_rejected_with_the_knob(
    tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    config = file_config(tmp_path)
    config["leaderElection"] = {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10}
    proc = RuntimeProcess(tmp_path, "timings", config)
    procs.append(proc.start())
    assert proc.wait_exit(20) == 2
    assert any(e.get("key") == "leaderElection.renewDeadlineSeconds" for e in proc.logs())


def test_bind_overrides_the_configs_listen_address(
    tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    # The harness's config binds 127.0.0.1; --bind moves the listener to another loopback address.
    config = file_config(tmp_path)
    proc = RuntimeProcess(tmp_path, "bound", config, extra_args=("--bind", "127.0.0.2"))
    procs.append(proc.start())

    def status() -> int | None:
        return healthz_status("127.0.0.2", proc.port)

    wait_for(lambda: status() == 200 or not proc.running, 20, "serving on 127.0.0.2")
    assert status() == 200
    with pytest.raises(ConnectionRefusedError):  # nothing listens on the config's 127.0.0.1
        socket.create_connection(("127.0.0.1", proc.port), timeout=2).close()
    assert proc.terminate() == 0


def test_an_ipv6_bind_address_serves_over_ipv6(tmp_path: Path, procs: list[RuntimeProcess]) -> None:
    proc = RuntimeProcess(tmp_path, "v6", file_config(tmp_path), extra_args=("--bind", "::1"))
    procs.append(proc.start())

    def status() -> int | None:
        return healthz_status("::1", proc.port)

    wait_for(lambda: status() == 200 or not proc.running, 20, "serving on ::1")
    assert status() == 200
    assert proc.terminate() == 0


@pytest.mark.parametrize("bind", ["localhost", "0.0.0.256", ""])
def test_a_bind_address_that_is_not_an_ip_is_refused_naming_the_key(
    tmp_path: Path, procs: list[RuntimeProcess], bind: str
) -> None:
    proc = RuntimeProcess(tmp_path, "badbind", file_config(tmp_path), extra_args=("--bind", bind))
    procs.append(proc.start())
    assert proc.wait_exit(20) == 2
    errors = [e for e in proc.logs() if e.get("level") == "error"]
    assert errors[0]["key"] == "http.bindAddress"
    assert "not an IP address" in errors[0]["msg"]
    assert not (tmp_path / "cp").exists()


def test_without_a_config_it_runs_on_the_embedded_file_store(
    tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    proc = RuntimeProcess(tmp_path, "default", None)
    procs.append(proc.start())
    proc.wait_ready()
    assert proc.get("/healthz")[0] == 200
    assert proc.leading()  # the file store has no election: the single process writes
    starting = next(e for e in proc.logs() if e.get("msg") == "starting")
    assert starting["backend"] == "file"
    assert proc.terminate() == 0


def test_sigterm_flushes_and_a_restart_does_not_re_emit(
    tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    config = file_config(tmp_path, debounceSeconds=300)  # only the shutdown flush persists sets
    bucket = tmp_path / "bucket"
    write_objects(bucket, [f"obj-{i:03d}.json" for i in range(10)])
    first = RuntimeProcess(tmp_path, "first", config)
    procs.append(first.start())
    first.wait_ready()
    wait_for(lambda: len(first.objects()) == 10, 20, "first emits the 10 objects")
    # An idle change (an object vanished) only goes through the debounced persist...
    (bucket / "obj-000.json").unlink()
    wait_for(
        lambda: (
            (first.metric("checkpoint_collector_polls_total", 'collector="objectstore/f1"') or 0)
            > 3
        ),
        20,
        "a few more polls",
    )
    assert first.terminate() == 0
    # ...and SIGTERM flushed it.
    rows = stored_rows(tmp_path / "cp")
    assert '"listed":9' in rows["objectstore/f1/scan"]
    assert any(e.get("msg") == "flushed" for e in first.logs())
    write_objects(bucket, ["obj-100.json"])
    second = RuntimeProcess(tmp_path, "second", config)
    procs.append(second.start())
    wait_for(lambda: len(second.objects()) == 1, 20, "second emits the new object")
    assert second.objects() == ["obj-100.json"]
    assert second.terminate() == 0


def test_the_projection_refuses_a_shard_that_could_not_fit_naming_the_knob(
    tmp_path: Path, procs: list[RuntimeProcess]
) -> None:
    config = file_config(tmp_path)
    config["collectors"][0]["maxSeenKeys"] = 1_000_000
    proc = RuntimeProcess(tmp_path, "too-big", config)
    procs.append(proc.start())
    assert proc.wait_exit(60) == 2
    error = next(e for e in proc.logs() if e.get("level") == "error")
    assert error["key"] == "collectors[0].maxSeenKeys"
    assert "1048576" in error["msg"]
    assert not (tmp_path / "cp").exists()
