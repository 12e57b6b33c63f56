"""`checkpoint-runtime run` as a process reading a real S3-compatible server (SeaweedFS):
credentials from the environment, the endpoint from `endpointUrl`, a SIGKILL in the middle of a
scan, and failing polls that are counted and retried with backoff while the runtime leads on."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from checkpoint_runtime.constants import OBJECTSTORE_CHUNK_OBJECTS
from checkpoint_testenv.helm import Release
from checkpoint_testenv.s3server import S3Server
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    RuntimeProcess,
    seen_ids,
    stored_rows,
)

FEED = 'collector="objectstore/f1"'


def config(tmp_path: Path, server: S3Server, bucket: str) -> dict[str, Any]:
    return {
        "store": {"backend": "file", "path": str(tmp_path / "cp")},
        "collectors": [
            {
                "kind": "objectstore",
                "feed": "f1",
                "url": f"s3://{bucket}/feed",
                "endpointUrl": server.endpoint,
                "pollSeconds": 0.2,
            }
        ],
    }


def upload(server: S3Server, bucket: str, count: int) -> list[str]:
    names = [f"{index // 250:02d}/obj-{index:05d}.json" for index in range(count)]
    server.put_many(
        bucket,
        [(f"feed/{name}", (json.dumps({"object": name}) + "\n").encode()) for name in names],
    )
    return names


def test_a_runtime_killed_mid_scan_repeats_at_most_one_chunk_and_loses_nothing(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, procs: list[RuntimeProcess]
) -> None:
    names = upload(s3_server, s3_bucket, 1_500)
    cfg = config(tmp_path, s3_server, s3_bucket)
    first = RuntimeProcess(tmp_path, "first", cfg, env=s3_server.env()).start()
    procs.append(first)
    wait_for(lambda: len(first.objects()) >= 2 * OBJECTSTORE_CHUNK_OBJECTS, 120, "first records")
    first.kill()  # SIGKILL mid-scan: no flush, no goodbye
    assert len(first.objects()) < len(names), "the scan ended before the kill"

    second = RuntimeProcess(tmp_path, "second", cfg, env=s3_server.env()).start()
    procs.append(second)
    wait_for(
        lambda: set(first.objects()) | set(second.objects()) == set(names), 180, "every object"
    )
    assert second.terminate() == 0
    emitted = Counter(first.objects() + second.objects())
    repeated = [name for name, times in emitted.items() if times > 1]
    assert max(emitted.values()) <= 2
    assert len(repeated) <= OBJECTSTORE_CHUNK_OBJECTS  # the documented at-least-once window
    assert set(repeated) <= set(first.objects())  # only what the killed process emitted
    rows = stored_rows(tmp_path / "cp")
    assert sum(1 for key in rows if key.startswith("objectstore/f1/seen/")) == len(names)
    last = second.logs()
    assert not [e for e in last if e.get("level") == "ERROR"], last[-5:]


def test_failing_polls_are_counted_named_and_retried_with_backoff_while_leading(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, procs: list[RuntimeProcess]
) -> None:
    upload(s3_server, s3_bucket, 20)
    wrong = {**s3_server.env(), "AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    proc = RuntimeProcess(tmp_path, "denied", config(tmp_path, s3_server, s3_bucket), env=wrong)
    procs.append(proc.start())
    proc.wait_ready()
    failures = f'{FEED},error="SourceAccessDeniedError"'
    wait_for(
        lambda: (proc.metric("checkpoint_collector_poll_failures_total", failures) or 0) >= 4,
        60,
        "four failed polls",
    )
    assert proc.leading()  # a source failure is not the lifecycle's: it keeps leading
    assert proc.get("/readyz")[0] == 200
    assert proc.metric("checkpoint_collector_polls_total", FEED) in (None, 0.0)
    assert proc.metric("checkpoint_collector_last_success_timestamp_seconds", FEED) == 0.0  # never
    warnings = [e for e in proc.logs() if e.get("error") == "SourceAccessDeniedError"]
    waits = [entry["retry_seconds"] for entry in warnings]
    assert waits[:4] == [0.2, 0.4, 0.8, 1.6]  # exponential backoff from pollSeconds
    assert [e["consecutive_failures"] for e in warnings[:4]] == [1, 2, 3, 4]
    assert "access denied" in warnings[0]["msg"]
    assert proc.records() == []
    assert proc.terminate() == 0
    assert not any(key.startswith("objectstore/f1/seen/") for key in stored_rows(tmp_path / "cp"))

    # The right Secret (a restarted pod): everything is collected, success is timestamped.
    before = time.time()
    fixed = RuntimeProcess(
        tmp_path, "fixed", config(tmp_path, s3_server, s3_bucket), env=s3_server.env()
    )
    procs.append(fixed.start())
    wait_for(lambda: len(fixed.objects()) == 20, 60, "all objects")
    wait_for(
        lambda: (
            (fixed.metric("checkpoint_collector_last_success_timestamp_seconds", FEED) or 0)
            >= before
        ),
        30,
        "a successful poll's timestamp",
    )
    assert fixed.terminate() == 0


def test_end_to_end_chart_config_real_api_server_and_real_s3_through_an_outage(
    chart_install: Callable[..., Release],
    s3_server: S3Server,
    s3_bucket: str,
    tmp_path: Path,
    procs: list[RuntimeProcess],
) -> None:
    feed = {
        "kind": "objectstore",
        "tailnet": "tn1",
        "feed": "s3feed",
        "url": f"s3://{s3_bucket}/feed",
        "endpointUrl": s3_server.endpoint,
        "pollSeconds": 0.3,
    }
    release = chart_install({"checkpoint": {"collectors": [feed]}})  # the chart schema admits it
    config = json.loads(json.dumps(release.rendered_config))
    assert config["collectors"] == [feed]
    config["store"]["debounceSeconds"] = 0.2
    # The chart's election timings (15/10/2 s): the test asserts the runtime keeps leading
    # through the outage, so it must not lose the lease to a loaded machine's scheduling.
    kubeconfig = release.write_kubeconfig(tmp_path / "sa.kubeconfig")
    names = upload(s3_server, s3_bucket, 300)
    proc = RuntimeProcess(tmp_path, "runtime-s3", config, kubeconfig, env=s3_server.env())
    procs.append(proc.start())
    proc.wait_ready()
    wait_for(proc.leading, 30, "leads")
    wait_for(lambda: sorted(proc.objects()) == names, 60, "every object emitted")
    shard = "tn1/objectstore/s3feed"
    wait_for(lambda: len(seen_ids(stored_rows(release), shard)) == 300, 30, "seen rows stored")
    rows_before = stored_rows(release)

    s3_server.stop()  # the endpoint goes away: polls fail, the runtime leads on
    try:
        failures = f'collector="{shard}",error="SourceUnreachableError"'
        wait_for(
            lambda: (proc.metric("checkpoint_collector_poll_failures_total", failures) or 0) >= 3,
            90,
            "three failed polls",
        )
        assert proc.leading()
        assert proc.running
        assert stored_rows(release) == rows_before
    finally:
        s3_server.start()
    late = [f"late/obj-{index}.json" for index in range(5)]
    s3_server.put_many(
        s3_bucket, [(f"feed/{name}", json.dumps({"object": name}).encode()) for name in late]
    )
    wait_for(lambda: sorted(proc.objects()) == sorted(names + late), 120, "late objects")
    assert proc.terminate() == 0
    assert len(proc.objects()) == len(set(proc.objects()))
