"""The repair a store refusal names: the `checkpoint-runtime set-aside` command line for a shard
object that cannot be read (shared by `run` and the operator commands)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.errors import CorruptShardError, KeyGrammarError, leaves
from checkpoint_runtime.format.naming import QUARANTINE, shard_name, validate_shard_key

if TYPE_CHECKING:  # the kubernetes client is imported only where a cluster is used
    from checkpoint_runtime.backends.kubernetes import KubernetesBackend
    from checkpoint_runtime.store.core import Store


def quarantined_rows(store: Store) -> list[tuple[str, str]]:
    """Rows a collector set aside as unparsable (`<namespace>/quarantine/<row>`), shown by
    `inspect` and counted by the checkpoint_quarantined_rows gauge."""
    return [(key, value) for key, value in store.items() if f"/{QUARANTINE}/" in key]


def object_name(backend: FileBackend | KubernetesBackend, shard: str) -> str:
    """The object name of a shard key (`objectstore/f1`), or the name itself."""
    try:
        validate_shard_key(shard)
    except KeyGrammarError:
        return shard.rpartition("/")[2].removesuffix(".shard")
    return shard_name(backend.lease_name, shard)


def hint(backend: FileBackend | KubernetesBackend, shard: str) -> str:
    name = object_name(backend, shard)
    if isinstance(backend, FileBackend):
        return backend.set_aside_hint(name)
    return (
        "Set it aside (it is kept, copied) with `checkpoint-runtime set-aside --namespace "
        f"{backend.namespace} --object {name}`, then restart"
    )


def with_repair(error: BaseException, backend: Backend) -> BaseException:
    """A corrupt-shard error (or every one in a group) with the command that sets the shard
    aside added to its message."""
    if not isinstance(backend, FileBackend) and not hasattr(backend, "namespace"):
        return error
    for leaf in leaves(error):
        if isinstance(leaf, CorruptShardError) and "set-aside" not in str(leaf):
            where: FileBackend | KubernetesBackend = backend  # type: ignore[assignment]
            leaf.args = (f"{leaf}; nothing was written. {hint(where, leaf.shard)}",)
    return error
