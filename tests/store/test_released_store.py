"""What installed stores already hold, pinned as literals: the current code must keep reading it.

fixtures/released-store.json was written once by the released store and is never regenerated:
shard ConfigMap names for two Lease names (the chart's default, and a long one with characters
a name cannot hold), store labels and the label selector, and whole objects (name, labels,
annotations, blob) for v2 shards (one of them a base and a delta) and a v1 shard.

A change to how names or labels are derived (the hash, its length, the readable prefix) keeps
every other test green, since they all derive both sides with the same code; it would orphan
every existing installation's shards. These tests fail instead.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
from store_harness import Harness, open_store, raw_shard

from checkpoint_runtime.constants import ANNOTATION_FORMAT, SHARD_FORMAT_V1, SHARD_FORMAT_V2
from checkpoint_runtime.format import codec
from checkpoint_runtime.format.gzipmembers import gunzip_members
from checkpoint_runtime.format.naming import label_selector, shard_labels, shard_name, store_label
from checkpoint_testenv.support.kubetarget import RawObject

RELEASED: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "released-store.json").read_text()
)
OBJECTS: dict[str, dict[str, Any]] = RELEASED["objects"]
NAMES = [
    pytest.param(lease, shard, name, id=f"{lease[:24]}:{shard[:40]}")
    for lease, names in RELEASED["names"].items()
    for shard, name in names.items()
]


@pytest.mark.parametrize(("lease", "shard", "name"), NAMES)
def test_shard_names_are_the_released_ones(lease: str, shard: str, name: str) -> None:
    assert shard_name(lease, shard) == name


@pytest.mark.parametrize("lease", sorted(RELEASED["labels"]))
def test_store_labels_and_selector_are_the_released_ones(lease: str) -> None:
    assert store_label(lease) == RELEASED["store_labels"][lease]
    assert shard_labels(lease) == RELEASED["labels"][lease]
    assert label_selector(lease) == RELEASED["label_selectors"][lease]


@pytest.mark.parametrize("name", sorted(OBJECTS))
def test_released_objects_are_named_labelled_and_decoded_as_released(name: str) -> None:
    obj = OBJECTS[name]
    assert shard_name(obj["lease"], obj["shard"]) == name
    assert shard_labels(obj["lease"]) == obj["labels"]
    decoded = codec.decode_stored(obj["shard"], base64.b64decode(obj["blob"]))
    assert decoded.format == obj["annotations"][ANNOTATION_FORMAT]
    assert decoded.rows == obj["rows"]


def test_the_fixture_covers_v1_a_v2_base_and_a_v2_delta() -> None:
    formats = {obj["annotations"][ANNOTATION_FORMAT] for obj in OBJECTS.values()}
    assert formats == {SHARD_FORMAT_V2, SHARD_FORMAT_V1}
    members = [
        len(gunzip_members(base64.b64decode(obj["blob"]), 1 << 20, obj["shard"]))
        for obj in OBJECTS.values()
        if obj["annotations"][ANNOTATION_FORMAT] == SHARD_FORMAT_V2
    ]
    assert sorted(set(members)) == [1, 2]  # a base alone, and a base with its delta


def test_a_store_opens_the_released_objects_and_writes_on(harness: Harness) -> None:
    """Planted exactly as released (name, labels, annotations, blob), found by discovery
    (the label selector), read, and written over by the current code."""
    leases = {obj["lease"] for obj in OBJECTS.values()}
    assert leases == {harness.lease_name}
    for name, obj in OBJECTS.items():
        blob = base64.b64decode(obj["blob"])
        harness.put_raw(name, RawObject(dict(obj["labels"]), dict(obj["annotations"]), blob))
    expected = {key: value for obj in OBJECTS.values() for key, value in obj["rows"].items()}

    store = open_store(harness, writer="upgraded", epoch=8)
    assert dict(store.items()) == expected
    for shard in (obj["shard"] for obj in OBJECTS.values()):
        store.set(f"{shard}/cursor", "after the upgrade")
    store.flush()

    assert sorted(harness.object_names()) == sorted(OBJECTS)  # written in place, no new object
    reread = open_store(harness, writer="observer", epoch=0)
    for obj in OBJECTS.values():
        shard = obj["shard"]
        assert dict(reread.items(shard + "/")) == {
            **obj["rows"],
            f"{shard}/cursor": "after the upgrade",
        }
        stored = raw_shard(harness, shard)
        assert stored is not None
        assert stored.labels == obj["labels"]
