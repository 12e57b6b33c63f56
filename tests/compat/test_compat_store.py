"""The store's core contract on every minor's own API server, as the chart's ServiceAccount.

The server is the pinned release of its minor (/version says so); on it the store creates a
shard, updates it guarded by resourceVersion, is refused with 409 once another writer moved it,
grows a shard into chunk slots, compacts one chunk, shrinks back and reopens to the same rows,
and reads back more shards than one page of its labelled list holds (`limit` and `continue`,
served more and more from the watch cache by the newer minors) and nothing of another store.
"""

from __future__ import annotations

import urllib.parse
from typing import Any

import pytest
from kubernetes import client

from checkpoint_runtime.backends.kubernetes import LIST_PAGE, KubernetesBackend
from checkpoint_runtime.errors import ConflictError
from checkpoint_runtime.format import codec_v3
from checkpoint_runtime.format.naming import label_selector, shard_labels, shard_name
from checkpoint_runtime.format.reference_rows import FeedWorkload
from checkpoint_runtime.store.core import Store
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.matrix import Minor
from checkpoint_testenv.support.kubetarget import KubeTarget

FEED = "tn/objectstore/feed-a"
SMALL = "tn/flowlogs"


def open_store(target: KubeTarget, writer: str = "a", epoch: int = 1, **options: Any) -> Store:
    return Store.open(target.backend(), writer=writer, epoch=epoch, **options)


def test_the_server_is_the_pinned_release_of_its_minor(
    kube_minor: Minor, minor_control_plane: ControlPlane
) -> None:
    with minor_control_plane.admin_api() as api:
        version = client.VersionApi(api).get_code()
    assert version.git_version == kube_minor.version
    assert (version.major, version.minor) == ("1", str(kube_minor.number))


def test_create_guarded_update_and_the_servers_conflict(target: KubeTarget) -> None:
    first = open_store(target)
    first.batch({f"{FEED}/cursor": "1"})  # create
    created = target.stored()[FEED]
    first.batch({f"{FEED}/cursor": "2"})  # update guarded by the version it created
    updated = target.stored()[FEED]
    assert (created.rows, updated.rows) == ({f"{FEED}/cursor": "1"}, {f"{FEED}/cursor": "2"})
    assert updated.version != created.version
    assert (updated.writer, updated.epoch) == ("a", 1)

    second = open_store(target, writer="b", epoch=2)
    second.take_ownership()  # restamps the shard: first's version is stale now
    first.set(f"{FEED}/cursor", "stale")
    with pytest.raises(ExceptionGroup) as raised:
        first.flush()
    (error,) = raised.value.exceptions
    assert isinstance(error, ConflictError)
    after = target.stored()[FEED]
    assert (after.rows, after.writer, after.epoch) == ({f"{FEED}/cursor": "2"}, "b", 2)

    # The server's own answer to a stale resourceVersion: 409 Conflict, nothing written.
    name = shard_name(target.lease_name, FEED)
    stale = target.admin.read_namespaced_config_map(name, target.namespace)
    stale.metadata.resource_version = created.version
    with pytest.raises(client.ApiException) as refused:
        target.admin.replace_namespaced_config_map(name, target.namespace, stale)
    assert refused.value.status == 409
    assert target.stored()[FEED].version == after.version


def test_a_shard_grows_into_chunks_compacts_one_shrinks_and_reopens(target: KubeTarget) -> None:
    rows = {k: v for k, v in FeedWorkload(FEED, 12_000, "uuid").rows.items() if "/seen/" in k}
    store = open_store(target)
    store.batch({f"{SMALL}/cursor": "c", **rows})
    heads = 2
    grown = target.object_names()
    assert len(grown) > heads, "12,000 seen ids should not fit one object"
    assert target.stored()[FEED].rows == rows  # the checker's reader, through the manifest

    compacting = open_store(target, writer="a", epoch=1, compaction_ratio=0)
    key = next(iter(rows))
    compacting.batch({key: "changed"})  # a compaction: the changed chunk into its other slot
    head = stored_head(target)
    index = codec_v3.partition_of(key, head.manifest.partitions)
    assert head.manifest.active_slot(index) == f"b{index}"
    assert len(target.object_names()) == len(grown) + 1
    assert dict(open_store(target, writer="c", epoch=2).items(FEED + "/")) == {
        **rows,
        key: "changed",
    }

    keep = dict(list(rows.items())[:20])
    compacting.batch({k: None for k in rows if k not in keep} | {key: None})
    reopened = open_store(target, writer="d", epoch=3)
    assert dict(reopened.items(FEED + "/")) == {k: v for k, v in keep.items() if k != key}
    assert reopened.get(f"{SMALL}/cursor") == "c"


def stored_head(target: KubeTarget) -> codec_v3.DecodedHead:
    raw = target.raw(shard_name(target.lease_name, FEED))
    assert raw is not None
    return codec_v3.decode_head(FEED, raw.blob)


def test_a_store_reads_every_page_of_its_labelled_list_and_nothing_else(
    target: KubeTarget,
) -> None:
    shards = [f"tn/objectstore/feed-{index}" for index in range(LIST_PAGE + 3)]
    open_store(target).batch({f"{shard}/cursor": shard for shard in shards})
    # Another store's shard and an unlabelled ConfigMap in the same namespace.
    other = client.V1ConfigMap(
        metadata=client.V1ObjectMeta(name="other-store-shard", labels=shard_labels("other")),
        data={"x": "y"},
    )
    target.admin.create_namespaced_config_map(target.namespace, other)
    plain = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="plain"), data={"x": "y"})
    target.admin.create_namespaced_config_map(target.namespace, plain)

    backend = target.backend()
    pages = list_pages(backend, label_selector(target.lease_name))
    reader = Store.open(backend, writer="reader", epoch=2)
    assert dict(reader.items("")) == {f"{shard}/cursor": shard for shard in shards}
    # 13 shards in pages of 10: a first page, then one with the server's continue token
    assert len(pages) == 2
    assert pages[0] is None
    assert pages[1]


def list_pages(backend: KubernetesBackend, selector: str) -> list[str | None]:
    """The continue token of every list of ConfigMaps by `selector` the backend sends (None on
    a first page), in order."""
    tokens: list[str | None] = []
    rest: Any = backend.api_client.rest_client
    original = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query)
        if parts.path.endswith("/configmaps") and query.get("labelSelector") == [selector]:
            tokens.append(query.get("continue", [None])[0])
        return original(method, url, *args, **kwargs)

    rest.request = request
    return tokens
