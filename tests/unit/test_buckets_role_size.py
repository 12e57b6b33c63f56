"""The name-pinned Role's projected size (runtime/rolesize.py): the startup check the render gate
runs too refuses a config whose pinned names one Role cannot hold, naming the numbers, and names
store.buckets when the buckets' Leases are what tips it over."""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_runtime.errors import RoleSizeError
from checkpoint_runtime.runtime import rolesize, startup
from checkpoint_runtime.runtime.settings import parse


def document(collectors: int, buckets: int = 1, max_chunks: int = 8) -> dict[str, Any]:
    return {
        "store": {
            "backend": "kubernetes",
            "namespace": "apps",
            "leaseName": "cr-checkpoint-runtime",
            "discovery": "names",
            "buckets": buckets,
            "maxChunks": max_chunks,
        },
        "collectors": [
            {"kind": "flowlogs", "tailnet": f"t{i}", "url": "http://flows.example"}
            for i in range(collectors)
        ],
    }


def test_the_projection_counts_every_pinned_name() -> None:
    size = rolesize.project(parse(document(3, buckets=4)))
    assert size is not None
    assert (size.configmap_names, size.lease_names) == (3 * 17, 1 + 2 * 4)
    assert rolesize.project(parse({**document(3), "store": {"backend": "file"}})) is None


def test_too_many_names_are_refused_with_the_numbers() -> None:
    with pytest.raises(RoleSizeError, match=r"^collectors: .* 20520 ConfigMap names") as refused:
        startup.check(document(40, max_chunks=256))
    assert "bytes projected, more than one Role holds (1048576)" in str(refused.value)


def test_the_buckets_are_named_when_their_leases_tip_it_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = parse(document(20, buckets=32))
    size = rolesize.project(settings)
    assert size is not None
    monkeypatch.setattr(rolesize, "ROLE_MAX_BYTES", size.projected_bytes - 1)
    with pytest.raises(RoleSizeError, match=r"^store\.buckets: .* 65 Lease names \(32 bucket"):
        rolesize.check(settings)
    rolesize.check(parse(document(20, buckets=1)))  # one bucket fits
