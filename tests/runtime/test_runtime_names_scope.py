"""The runtime process under the name-pinned Role (rbac.scope=names), on the real API server.

`checkpoint-runtime run` with the config the chart rendered (store.discovery=names) and the
chart ServiceAccount's token: it elects itself, finds its shard by name (the Role grants no
list), checkpoints, and a restarted process continues from the API state without emitting
anything again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from checkpoint_runtime.format.naming import object_id
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.helm import Release
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    RuntimeProcess,
    runtime_config,
    seen_ids,
    stored_rows,
    write_objects,
)

SHARD = "tn1/objectstore/feed-a"  # the collector runtime_config() configures
VALUES = {
    "rbac": {"scope": "names"},
    "checkpoint": {
        "collectors": [
            {"kind": "objectstore", "tailnet": "tn1", "feed": "feed-a", "url": "file:///feeds"}
        ]
    },
}


def test_the_runtime_checkpoints_and_restarts_under_the_name_pinned_role(
    chart_install: Callable[..., Release],
    control_plane: ControlPlane,
    tmp_path: Path,
    procs: list[RuntimeProcess],
) -> None:
    release = chart_install(VALUES, control_plane.create_namespace("names"))
    bucket = tmp_path / "bucket"
    bucket.mkdir()
    config = runtime_config(release, bucket)
    assert config["store"]["discovery"] == "names"
    first_batch = [f"a-{i:02d}.json" for i in range(6)]
    write_objects(bucket, first_batch)
    kubeconfig = release.write_kubeconfig(tmp_path / "kubeconfig")

    first = RuntimeProcess(tmp_path, "runtime-a", config, kubeconfig)
    procs.append(first.start())
    wait_for(lambda: len(first.objects()) == len(first_batch), 30, "the first objects emitted")
    assert first.terminate() == 0

    second_batch = [f"b-{i:02d}.json" for i in range(4)]
    write_objects(bucket, second_batch)
    second = RuntimeProcess(tmp_path, "runtime-b", config, kubeconfig)
    procs.append(second.start())
    wait_for(lambda: len(second.objects()) == len(second_batch), 30, "the new objects emitted")
    assert sorted(second.objects()) == second_batch  # nothing emitted twice
    assert second.terminate() == 0
    assert not [line for line in second.logs() if "403" in str(line)]
    everything = first_batch + second_batch
    assert seen_ids(stored_rows(release), SHARD) == {object_id(name) for name in everything}
