"""`checkpoint-runtime downgrade --to v2`: the explicit step before rolling back to a release
that reads `gzip-shards-v2` at most. Stop the runtime first (scale it to zero): the command
writes under the newest epoch it finds, and a leader that writes meanwhile makes it conflict.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.constants import ANNOTATION_STORE_KEY, CONFIGMAP_VALUE_LIMIT
from checkpoint_runtime.errors import ExitCode
from checkpoint_runtime.ops.commands import _print, _select, _store_arguments, store_sealing
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.downgrade import downgrade_to_v2

if TYPE_CHECKING:
    from checkpoint_runtime.backends.kubernetes import KubernetesBackend

DOWNGRADE_WRITER = "checkpoint-runtime-downgrade"


def _downgrade(args: argparse.Namespace) -> int:
    selection = _select(args)
    backend, deadline = selection.open(), selection.deadline
    store = Store.open(backend, writer=DOWNGRADE_WRITER, migrate=False, deadline_seconds=deadline)
    newest = max((s.stamp.epoch for s in store.shard_states().values()), default=0)
    sealing = store_sealing(backend)  # what it rewrites stays readable by this release too
    store = Store.open(
        backend,
        writer=DOWNGRADE_WRITER,
        epoch=newest,
        migrate=False,
        deadline_seconds=deadline,
        sealing=sealing,
    )
    report = downgrade_to_v2(
        store.shard_states(), backend, store.fence, store.new_deadline(), sealing
    )
    lines = [f"rewritten as gzip-shards-v2: {', '.join(report.rewritten) or '-'}"]
    lines.append(f"already in an older format: {', '.join(report.unchanged) or '-'}")
    if store.foreign:
        lines.append(
            f"not written by this store, left as they are: {', '.join(sorted(store.foreign))}"
        )
    for shard, size in sorted(report.too_large.items()):
        lines.append(
            f"cannot be rewritten: {shard} needs {size} bytes in one object (limit "
            f"{CONFIGMAP_VALUE_LIMIT}); the previous release refuses it by name"
        )
    key_left = _drop_store_key(backend, lines)
    _print(args, report.__dict__, "\n".join(lines))
    return ExitCode.FINDING if report.too_large or key_left else ExitCode.OK


def _drop_store_key(backend: FileBackend | KubernetesBackend, lines: list[str]) -> bool:
    """Remove the store key from the Lease (the older release does not seal; see
    `drop_store_key`) and say so in `lines`; True if a key is left that could not be removed."""
    from kubernetes.client.exceptions import ApiException

    from checkpoint_runtime.runtime.lease import drop_store_key

    if isinstance(backend, FileBackend):
        return False
    try:
        dropped = drop_store_key(backend)
    except ApiException as error:
        lines.append(
            f"the store key is still on Lease {backend.lease_name} ({error.status} "
            f"{error.reason}): remove it before this release runs again (kubectl annotate "
            f"lease -n {backend.namespace} {backend.lease_name} {ANNOTATION_STORE_KEY}-)"
        )
        return True
    if dropped:
        lines.append(
            f"store key removed from Lease {backend.lease_name}: the older release does not "
            "seal its heads; when this release runs again its leader adopts and reseals them"
        )
    return False


def register(subparsers: Any) -> None:
    downgrade = subparsers.add_parser(
        "downgrade", help="rewrite gzip-shards-v3 shards as v2 before a rollback"
    )
    _store_arguments(downgrade)
    downgrade.add_argument("--to", required=True, choices=("v2",), help="the format to write")
    downgrade.add_argument("--json", action="store_true", help="print JSON instead of text")
    downgrade.set_defaults(func=_downgrade)
