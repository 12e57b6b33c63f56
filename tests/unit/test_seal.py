"""The head seal (store/seal.py): what it covers, and what it refuses."""

from __future__ import annotations

import pytest

from checkpoint_runtime.constants import (
    ANNOTATION_EPOCH,
    ANNOTATION_LEASE_UID,
    ANNOTATION_LEGACY_DIGEST,
    ANNOTATION_ROWS,
    ANNOTATION_SEAL,
    ANNOTATION_SHARD_KEY,
    ANNOTATION_WRITER,
)
from checkpoint_runtime.errors import ForeignHeadError
from checkpoint_runtime.store.seal import SEALED_ANNOTATIONS, Sealing, key_bytes, new_store_key

SHARD = "tn1/flowlogs"
BLOB = b"a head's blob"
ANNOTATIONS = {
    ANNOTATION_SHARD_KEY: SHARD,
    ANNOTATION_EPOCH: "3",
    ANNOTATION_WRITER: "alpha-5c6d7_0a1b2c3d",
    ANNOTATION_LEASE_UID: "8f0c2b8e-uid",
}


def sealing(adopt: bool = False) -> Sealing:
    key = key_bytes(new_store_key())
    assert key is not None
    return Sealing(key, "alpha", adopt)


def test_a_new_store_key_is_32_random_bytes_in_base64url() -> None:
    first, second = new_store_key(), new_store_key()
    assert first != second
    assert len(first) == 43
    assert key_bytes(first) is not None
    assert key_bytes("not a key") is None
    assert key_bytes(first[:-2]) is None  # too short


def test_a_sealed_head_passes_and_its_seal_is_the_only_evidence() -> None:
    seal = sealing()
    sealed = seal.sealed(SHARD, BLOB, ANNOTATIONS)
    assert seal.problem(SHARD, BLOB, sealed) is None
    assert sealed[ANNOTATION_SEAL].startswith("hmac-sha256-v1:")
    assert seal.problem(SHARD, BLOB, ANNOTATIONS) == "it carries no seal"


@pytest.mark.parametrize(
    "change",
    [
        lambda a: {**a, ANNOTATION_EPOCH: "4"},  # the fence's stamp
        lambda a: {**a, ANNOTATION_WRITER: "beta-squatter"},
        lambda a: {**a, ANNOTATION_LEASE_UID: "another"},
        lambda a: {**a, ANNOTATION_LEGACY_DIGEST: "sha256:00"},  # what migration compares
        lambda a: {**a, ANNOTATION_SHARD_KEY: "tn2/flowlogs"},
    ],
)
def test_an_edited_annotation_breaks_the_seal(change: object) -> None:
    seal = sealing()
    sealed = seal.sealed(SHARD, BLOB, ANNOTATIONS)
    edited = change(sealed)  # type: ignore[operator]
    assert seal.problem(SHARD, BLOB, edited) is not None


def test_another_blob_shard_store_or_key_breaks_the_seal() -> None:
    seal = sealing()
    sealed = seal.sealed(SHARD, BLOB, ANNOTATIONS)
    assert seal.problem(SHARD, BLOB + b"!", sealed) is not None
    assert seal.problem("tn2/flowlogs", BLOB, sealed) is not None
    assert Sealing(seal.key, "beta").problem(SHARD, BLOB, sealed) is not None
    assert "does not match" in (sealing().problem(SHARD, BLOB, sealed) or "")


def test_sizes_and_the_write_id_are_not_covered() -> None:
    seal = sealing()
    sealed = seal.sealed(SHARD, BLOB, ANNOTATIONS)
    assert ANNOTATION_ROWS not in SEALED_ANNOTATIONS
    assert seal.problem(SHARD, BLOB, {**sealed, ANNOTATION_ROWS: "7"}) is None


def test_an_adopting_seal_takes_any_head_and_check_names_the_object() -> None:
    assert sealing(adopt=True).problem(SHARD, BLOB, ANNOTATIONS) is None
    with pytest.raises(ForeignHeadError) as refused:
        sealing().check(SHARD, "alpha-tn1-flowlogs-0123", BLOB, ANNOTATIONS)
    assert refused.value.shard == SHARD
    assert refused.value.name == "alpha-tn1-flowlogs-0123"
    assert "alpha-tn1-flowlogs-0123 was not written by this store" in str(refused.value)
