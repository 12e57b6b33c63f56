"""A head the store did not write is refused as foreign, never read as state (store/seal.py).

A forger here is anyone writing under the store's shard names without the store key: a store
of the same Lease name that does not seal (what a neighbour who copies the store's labels and
annotations writes), or one sealing with another key. On the API server, the forger writes as
the chart's ServiceAccount (it is the object, not the writer's identity, that is judged; the
neighbour's own token is used in tests/runtime/test_runtime_neighbour.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client
from store_harness import Harness, KubeHarness, open_store, raw_shard

from checkpoint_runtime import cli
from checkpoint_runtime.constants import ANNOTATION_EPOCH, ANNOTATION_SEAL, ANNOTATION_STORE_KEY
from checkpoint_runtime.errors import ForeignHeadError
from checkpoint_runtime.format.legacy import encode_legacy
from checkpoint_runtime.format.naming import shard_name
from checkpoint_runtime.store.seal import Sealing, key_bytes, new_store_key
from checkpoint_testenv.support.kubetarget import RawObject

REAL = "tn1/objectstore/feed-a"
SQUATTED = "tn1/flowlogs"
FORGED_CURSOR = "2099-01-01T00:00:00Z"


def seal(harness: Harness, adopt: bool = False) -> Sealing:
    key = key_bytes(new_store_key())
    assert key is not None
    return Sealing(key, harness.lease_name, adopt)


def forge(harness: Harness, sealing: Sealing | None = None) -> None:
    """A well-formed v3 head of SQUATTED with a far-future cursor, written by a forger."""
    forger = open_store(harness, "beta-squatter", 0, sealing=sealing)
    forger.batch({f"{SQUATTED}/cursor": FORGED_CURSOR})


def real_rows(harness: Harness, sealing: Sealing) -> dict[str, str]:
    store = open_store(harness, "alpha-1", 1, sealing=sealing)
    rows = {f"{REAL}/cursor": "logs/0042.json", f"{REAL}/scan": "2026-03-01T00:00:00Z"}
    store.batch(rows)
    return rows


@pytest.mark.parametrize("forger_key", ["none", "another"])
def test_a_forged_head_is_refused_by_name_never_read_and_the_real_rows_stay(
    harness: Harness, forger_key: str
) -> None:
    ours = seal(harness)
    rows = real_rows(harness, ours)
    forge(harness, None if forger_key == "none" else seal(harness))
    forged = raw_shard(harness, SQUATTED)

    store = open_store(harness, "alpha-2", 2, sealing=ours)
    assert store.get(f"{SQUATTED}/cursor") is None  # never state
    assert dict(store.items(REAL)) == rows
    refused = store.foreign[SQUATTED]
    assert refused.name == shard_name(harness.lease_name, SQUATTED)
    assert ("carries no seal" if forger_key == "none" else "does not match") in str(refused)
    gauge = store.metrics.registry.get_sample_value("checkpoint_shard_foreign", {"shard": SQUATTED})
    assert gauge == 1
    with pytest.raises(ForeignHeadError):  # nothing of ours is written over it
        store.set(f"{SQUATTED}/cursor", "2026-03-01T00:00:00Z")
    store.take_ownership()
    assert raw_shard(harness, SQUATTED) == forged
    assert dict(open_store(harness, "alpha-3", 3, sealing=ours).items(REAL)) == rows


def test_a_head_edited_after_it_was_sealed_is_refused(harness: Harness) -> None:
    ours = seal(harness)
    real_rows(harness, ours)
    stored = raw_shard(harness, REAL)
    assert stored is not None
    annotations = {**stored.annotations, ANNOTATION_EPOCH: "99"}  # a forged stamp
    harness.put_raw(
        shard_name(harness.lease_name, REAL), RawObject(stored.labels, annotations, stored.blob)
    )
    store = open_store(harness, "alpha-2", 2, sealing=ours)
    assert REAL in store.foreign
    assert store.items(REAL) == []


def test_a_forged_head_met_by_a_create_is_named_and_left_as_it_is(harness: Harness) -> None:
    ours = seal(harness)
    store = open_store(harness, "alpha-1", 1, sealing=ours)  # SQUATTED not written yet
    forge(harness)
    forged = raw_shard(harness, SQUATTED)
    with pytest.raises(ExceptionGroup) as failed:
        store.batch({f"{SQUATTED}/cursor": "2026-03-01T00:00:00Z"})
    assert failed.group_contains(ForeignHeadError)
    assert raw_shard(harness, SQUATTED) == forged  # not taken over as a deposed writer's


def test_a_head_that_changed_to_a_forged_one_is_refused_on_reload(harness: Harness) -> None:
    ours = seal(harness)
    real_rows(harness, ours)
    store = open_store(harness, "alpha-2", 2, sealing=ours)
    stored = raw_shard(harness, REAL)
    assert stored is not None
    unsealed = {k: v for k, v in stored.annotations.items() if k != ANNOTATION_SEAL}
    harness.put_raw(
        shard_name(harness.lease_name, REAL), RawObject(stored.labels, unsealed, stored.blob)
    )
    with pytest.raises(ForeignHeadError):
        store.reload(REAL)


def test_a_new_store_key_adopts_the_heads_once_and_seals_them(harness: Harness) -> None:
    unsealed = open_store(harness, "old-release", 1)  # written before heads were sealed
    unsealed.batch({f"{REAL}/cursor": "logs/0001.json"})
    adopting = seal(harness, adopt=True)
    store = open_store(harness, "alpha-1", 2, sealing=adopting)
    assert store.get(f"{REAL}/cursor") == "logs/0001.json"
    assert store.foreign == {}
    store.take_ownership()
    assert store.sealing is not None
    assert not store.sealing.adopt  # adopts nothing after it sealed what it found
    keyed = Sealing(adopting.key, harness.lease_name)
    assert open_store(harness, "alpha-2", 3, sealing=keyed).get(f"{REAL}/cursor") == (
        "logs/0001.json"
    )


def test_an_unsealed_head_is_refused_before_its_blob_is_decoded(harness: Harness) -> None:
    """A forger's blob is never parsed: a squatted head that is not even a shard is named
    foreign, not corrupt (which would stop the whole store from opening)."""
    ours = seal(harness)
    real_rows(harness, ours)
    stored = raw_shard(harness, REAL)
    assert stored is not None
    forge(harness)
    squatted = raw_shard(harness, SQUATTED)
    assert squatted is not None
    harness.put_raw(
        shard_name(harness.lease_name, SQUATTED),
        RawObject(squatted.labels, squatted.annotations, squatted.blob[:-12]),  # truncated
    )
    store = open_store(harness, "alpha-2", 2, sealing=ours)
    assert SQUATTED in store.foreign
    assert store.get(f"{REAL}/cursor") == "logs/0042.json"


@pytest.mark.apiserver
def test_an_operators_migrate_seals_what_it_writes_with_the_store_key(
    kube: KubeHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`migrate --from-legacy` (as the chart's ServiceAccount) writes heads the runtime then
    reads: sealed with the key on the store's Lease, not refused as foreign."""
    key = new_store_key()
    with kube.release.plane.admin_api() as api:
        client.CoordinationV1Api(api).create_namespaced_lease(
            kube.namespace,
            client.V1Lease(
                metadata=client.V1ObjectMeta(
                    name=kube.lease_name, annotations={ANNOTATION_STORE_KEY: key}
                ),
                spec=client.V1LeaseSpec(holder_identity="", lease_duration_seconds=1),
            ),
        )
    legacy = {f"{REAL}/cursor": "logs/0007.json", f"{SQUATTED}/cursor": "2026-03-01T00:00:00Z"}
    kube.write_legacy("old-checkpoints", encode_legacy(legacy))
    kubeconfig = kube.release.write_kubeconfig(tmp_path / "kc")
    where = ["--namespace", kube.namespace, "--lease-name", kube.lease_name]
    where += ["--kubeconfig", str(kubeconfig), "--legacy-name", "old-checkpoints"]
    assert cli.main(["migrate", *where, "--from-legacy"]) == 0
    capsys.readouterr()
    raw = key_bytes(key)
    assert raw is not None
    store = open_store(kube, "alpha-1", 5, sealing=Sealing(raw, kube.lease_name))
    assert store.foreign == {}
    assert dict(store.items("")) == legacy


@pytest.mark.apiserver
def test_downgrade_removes_the_store_key_so_the_release_adopts_the_older_ones_heads_again(
    kube: KubeHarness, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before a rollback to a release that does not seal, `downgrade` removes the key from the
    Lease (as the chart's ServiceAccount): the older release's unsealed heads are then adopted
    by this release when it returns, not refused as foreign."""
    key = new_store_key()
    with kube.release.plane.admin_api() as api:
        leases = client.CoordinationV1Api(api)
        leases.create_namespaced_lease(
            kube.namespace,
            client.V1Lease(
                metadata=client.V1ObjectMeta(
                    name=kube.lease_name, annotations={ANNOTATION_STORE_KEY: key}
                ),
                spec=client.V1LeaseSpec(holder_identity="", lease_duration_seconds=1),
            ),
        )
    raw = key_bytes(key)
    assert raw is not None
    sealed = open_store(kube, "alpha-1", 1, sealing=Sealing(raw, kube.lease_name))
    sealed.batch({f"{REAL}/cursor": "logs/0007.json"})
    sealed.flush()
    kubeconfig = kube.release.write_kubeconfig(tmp_path / "kc")
    where = ["--namespace", kube.namespace, "--lease-name", kube.lease_name]
    assert cli.main(["downgrade", "--to", "v2", *where, "--kubeconfig", str(kubeconfig)]) == 0
    assert f"store key removed from Lease {kube.lease_name}" in capsys.readouterr().out
    with kube.release.plane.admin_api() as api:
        lease = client.CoordinationV1Api(api).read_namespaced_lease(kube.lease_name, kube.namespace)
    assert ANNOTATION_STORE_KEY not in (lease.metadata.annotations or {})

    older = open_store(kube, "older-1", 2)  # the release rolled back to: no seal
    older.batch({f"{REAL}/cursor": "logs/0008.json"})
    older.flush()
    fresh = key_bytes(new_store_key())  # this release returns: a Lease without a key
    assert fresh is not None
    returned = open_store(kube, "alpha-2", 3, sealing=Sealing(fresh, kube.lease_name, adopt=True))
    assert returned.foreign == {}
    assert returned.get(f"{REAL}/cursor") == "logs/0008.json"
