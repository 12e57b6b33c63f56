"""Whether the Lease of the store's name is one the store's own replicas can have written.

Anyone allowed to create Leases in the coordination namespace (RBAC cannot pin `create` to a
name) can create the store's Lease before the store does, or after it was deleted, and hold it
for as long as its `leaseDurationSeconds` says: a standby would wait, healthy and silent. A
replica of the store writes its Lease only in one shape, so a record outside that shape is
named at once (`foreign_lease`) instead of waited on:

- labels: the store's Lease carries the store's Lease labels (`labels`: the runtime passes
  `naming.lease_labels`) once the runtime created or took it over; a Lease created by an
  earlier release carries none, so only one of those labels with another value is foreign;
- holder identity: empty (released), or a candidate identity (`HOLDER_IDENTITY`: a pod name,
  or the `--identity` given, optionally with the random suffix `default_identity` adds);
- lease duration: at most what the chart renders (`LEASE_DURATION_MAX_SECONDS`) or the
  runtime's own configured duration, whichever is longer.

The vetting only reports: the election keeps client-go's rules, so a foreign record that expires
(its creator cannot renew a Lease it may not update) is taken over as any expired one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from checkpoint_runtime.constants import LEASE_DURATION_MAX_SECONDS, MAX_DNS_SUBDOMAIN
from checkpoint_runtime.election.lease_lock import LeaseRecord
from checkpoint_runtime.errors import quote

HOLDER_IDENTITY = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?(_[0-9a-f]{8})?")
"""A candidate identity: a DNS-1123 subdomain (a pod name), optionally `_` + 8 hex digits."""
HOLDER_IDENTITY_MAX = MAX_DNS_SUBDOMAIN + 9


def valid_identity(identity: str) -> bool:
    """`identity` has the shape of a candidate identity of this store."""
    return len(identity) <= HOLDER_IDENTITY_MAX and HOLDER_IDENTITY.fullmatch(identity) is not None


@dataclass(frozen=True)
class LeaseVetting:
    """What a Lease of the store's name must look like; `foreign` says why one does not."""

    own_duration: int
    """The runtime's own configured leaseDurationSeconds (a test may run below the chart's)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """The labels the store's replicas put on its Lease (`naming.lease_labels`)."""

    @property
    def max_duration(self) -> int:
        return max(LEASE_DURATION_MAX_SECONDS, self.own_duration)

    def foreign(self, record: LeaseRecord, labels: Mapping[str, str] | None) -> str | None:
        """Why `record` (with the Lease's `labels`) is not one of the store's replicas' Lease,
        or None. A released record (no holder) is never waited on and is not judged."""
        if not record.holder_identity:
            return None
        for key, value in sorted(self.labels.items()):
            found = (labels or {}).get(key)
            if found is not None and found != value:
                return f"label {key}={quote(found)} is not this store's {value!r}"
        if not valid_identity(record.holder_identity):
            return (
                f"holder identity {quote(record.holder_identity)} is not a candidate identity "
                "(a pod name, optionally with _ and 8 hex digits)"
            )
        if record.lease_duration_seconds > self.max_duration:
            return (
                f"leaseDurationSeconds {record.lease_duration_seconds} is longer than any "
                f"replica of this store holds it ({self.max_duration})"
            )
        return None
