"""Leadership buckets in tests: collector feeds that fill every bucket, a release's runtime
config with one object-store collector per feed, and how many buckets a process leads."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from checkpoint_runtime.election.buckets import bucket_of
from checkpoint_testenv.support.runtime_process import RuntimeProcess, runtime_config

if TYPE_CHECKING:
    from checkpoint_testenv.helm import Release


def feeds_covering(buckets: int, per_bucket: int = 1) -> list[str]:
    """Feed names whose collector namespaces (tn1/objectstore/<feed>) fill every bucket."""
    chosen: dict[int, list[str]] = {index: [] for index in range(buckets)}
    number = 0
    while any(len(names) < per_bucket for names in chosen.values()):
        feed = f"feed-{number}"
        names = chosen[bucket_of(f"tn1/objectstore/{feed}", buckets)]
        if len(names) < per_bucket:
            names.append(feed)
        number += 1
    return sorted(feed for names in chosen.values() for feed in names)


def bucketed_config(release: Release, root: Path, feeds: list[str]) -> dict[str, Any]:
    """The release's config with one object-store collector per feed (folder `root/<feed>`).

    No debounced persist within a test: a checkpoint reaches its shard only by a collector's
    batch or a flush (a handover's, or take_ownership's)."""
    config = runtime_config(release, root, debounceSeconds=300)
    template = config["collectors"][0]
    config["collectors"] = [
        {**template, "feed": feed, "url": (root / feed).as_uri()} for feed in feeds
    ]
    return config


def led(proc: RuntimeProcess) -> int:
    """The buckets `proc` leads (its checkpoint_buckets_led)."""
    return int(proc.metric("checkpoint_buckets_led") or 0)


def lease_requests(release: Release) -> dict[str, float]:
    """The API server's count of Lease requests so far (apiserver_request_total, every
    namespace), by its verb: GET, PUT (an update), POST (a create). Its own identity Lease adds
    about one PUT per 10 s; nothing else in the test control plane writes Leases."""
    with release.plane.admin_api() as api:
        method, url, headers, body, post = api.param_serialize(
            "GET", "/metrics", auth_settings=["BearerToken"]
        )
        response = api.call_api(method, url, headers, body, post, _request_timeout=10)
        response.read()
        text = response.data.decode()
    counts: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith("apiserver_request_total{") or 'resource="leases"' not in line:
            continue
        verb = line.split('verb="', 1)[1].split('"', 1)[0]
        counts[verb] = counts.get(verb, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts
