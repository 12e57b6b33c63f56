"""The image on the file store, as the chart runs it with `checkpoint.store.backend: file`.

A host folder is the checkpoint volume, another the object-store feed (mounted read-only), the
config is mounted where the chart mounts its ConfigMap, and the container runs the chart's args.
SIGTERM (what the kubelet sends) must flush; the shards are read back on the host with the
project's own store; a second container on the same volume continues where the first stopped.
"""

from __future__ import annotations

import json
from pathlib import Path

from image_harness import Container, Podman, chown_for_runtime

from checkpoint_runtime.backends.file import SHARD_SUFFIX, FileBackend
from checkpoint_runtime.constants import ANNOTATION_WRITER, DEFAULT_STORE_NAME
from checkpoint_runtime.format.naming import object_id
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.support.polling import wait_for
from checkpoint_testenv.support.runtime_process import (
    first_lines,
    log_entries,
    seen_ids,
    sink_records,
    stored_rows,
    write_objects,
)

CONFIG_DIR = "/etc/checkpoint-runtime"  # the chart's config mount
CHART_ARGS = ("run", "--config", f"{CONFIG_DIR}/config.json")
STORE_PATH = "/var/lib/checkpoint-runtime"  # the chart's checkpoint.store.path
SHARD = "objectstore/audit"


def objects(out: Path) -> list[str]:
    """The objects the container emitted (its file sink in `out`)."""
    return first_lines(sink_records(out / "records.jsonl"))


def start(podman: Podman, image: str, tmp_path: Path, run: str) -> tuple[Container, Path]:
    out = tmp_path / run
    out.mkdir()
    chown_for_runtime(out)
    mounts = (
        "--volume", f"{tmp_path / 'feed'}:/data/feed:ro",
        "--volume", f"{tmp_path / 'store'}:{STORE_PATH}",
        "--volume", f"{tmp_path / 'config'}:{CONFIG_DIR}:ro",
        "--volume", f"{out}:/out",
    )  # fmt: skip
    return podman.start(image, *CHART_ARGS, options=mounts), out


def test_a_file_store_run_checkpoints_on_sigterm_and_a_restart_continues(
    podman: Podman, image: str, tmp_path: Path
) -> None:
    names = [f"2026/obj-{i:03d}.json" for i in range(8)]
    write_objects(tmp_path / "feed", names)
    (tmp_path / "store").mkdir()
    chown_for_runtime(tmp_path / "store")
    (tmp_path / "config").mkdir()
    config = {
        "store": {"backend": "file", "path": STORE_PATH, "debounceSeconds": 300},
        "collectors": [
            {"kind": "objectstore", "feed": "audit", "url": "file:///data/feed", "pollSeconds": 0.2}
        ],
        "sink": {"kind": "file", "path": "/out/records.jsonl"},
    }
    (tmp_path / "config" / "config.json").write_text(json.dumps(config))

    first, out = start(podman, image, tmp_path, "first")
    try:
        wait_for(
            lambda: len(objects(out)) == len(names) or not first.running(),
            60,
            "the container emits every object",
        )
        assert sorted(objects(out)) == names, first.logs()
        assert first.terminate() == 0, first.logs()
        assert any(e.get("msg") == "flushed" for e in log_entries(first.logs()))
    finally:
        first.remove()

    shard_files = list((tmp_path / "store").glob(f"*{SHARD_SUFFIX}"))
    assert len(shard_files) == 1
    assert shard_files[0].stat().st_uid == 10001  # written by the image's user
    rows = stored_rows(tmp_path / "store")
    assert seen_ids(rows, SHARD) == {object_id(name) for name in names}
    assert rows[f"{SHARD}/cursor"] == names[-1]
    header = json.loads(shard_files[0].read_bytes().partition(b"\n")[0])
    assert header["annotations"][ANNOTATION_WRITER]

    write_objects(tmp_path / "feed", ["2026/obj-100.json"])
    second, out = start(podman, image, tmp_path, "second")
    try:
        wait_for(
            lambda: len(objects(out)) >= 1 or not second.running(),
            60,
            "the second container emits the new object",
        )
        assert second.terminate() == 0, second.logs()
    finally:
        second.remove()
    assert objects(out) == ["2026/obj-100.json"]  # nothing the checkpoint covers again
    store = Store.open(FileBackend(tmp_path / "store", DEFAULT_STORE_NAME), writer="host-reader")
    assert len(seen_ids(dict(store.items("")), SHARD)) == len(names) + 1
