"""One store in its own process, driven line by line by scripts/bench/etcd_cost.py.

The etcd benchmark compares two releases of the store on one etcd: this tree's and an older one
(its `src/` extracted from git, put first on PYTHONPATH), so each runs its own code for real.
Both speak this protocol on stdin/stdout, one JSON object a line:

    {"op": "open", "host": ..., "ca": ..., "token": ..., "namespace": ..., "lease": ...,
     "shard": ..., "rows": N, "shape": "uuid"[, "seal": true][, "prepare": true]}
                                                        -> {"format", "objects", "rows"}
    {"op": "step", "count": K, "iteration": I}          -> {"change_bytes", "ms"} or {"error"}
    {"op": "close"}                                      -> {}

A step changes K seen rows (a new timestamp each) and persists synchronously (`batch`);
`change_bytes` is the gzip size of exactly those changed rows (the compressed change). This
tree's store only: `seal` seals every head with a key of its own (as the runtime does), and
`prepare` calls `Store.prepare_compactions` after each step (what the debounce loop does while
nothing is due; it writes nothing).
"""

from __future__ import annotations

import argparse
import gzip
import json
import secrets
import sys
import time
from typing import Any

from kubernetes import client

from checkpoint_runtime.backends.kubernetes import KubernetesBackend
from checkpoint_runtime.format.reference_rows import EPOCH_NS, FeedWorkload
from checkpoint_runtime.store.core import Store

try:  # this tree: the text forms of ids and values live with the key grammar
    from checkpoint_runtime.format.naming import rfc3339_from_ns
except ImportError:  # the older release compared against: their own module
    from checkpoint_runtime.format.values import rfc3339_from_ns  # type: ignore[no-redef]


class Worker:
    def __init__(self) -> None:
        self.store: Store | None = None
        self.seen: list[str] = []
        self.prepare = False

    def open(self, request: dict[str, Any]) -> dict[str, Any]:
        configuration = client.Configuration()
        configuration.host = request["host"]
        configuration.ssl_ca_cert = request["ca"]
        configuration.api_key = {"authorization": request["token"]}
        configuration.api_key_prefix = {"authorization": "Bearer"}
        backend = KubernetesBackend(configuration, request["namespace"], request["lease"])
        options: dict[str, Any] = {}
        if request.get("seal"):
            from checkpoint_runtime.store.seal import Sealing

            options["sealing"] = Sealing(secrets.token_bytes(32), request["lease"])
        self.prepare = bool(request.get("prepare"))
        self.store = Store.open(backend, writer="bench", epoch=1, deadline_seconds=120, **options)
        rows = FeedWorkload(request["shard"], request["rows"], request["shape"]).rows
        self.store.batch(rows)
        self.seen = [key for key in rows if "/seen/" in key]
        core = client.CoreV1Api(backend.api_client)
        objects = core.list_namespaced_config_map(request["namespace"]).items
        formats = sorted(
            {
                (item.metadata.annotations or {}).get("checkpoint-runtime.io/format", "")
                for item in objects
            }
            - {""}
        )
        return {"format": ",".join(formats), "objects": len(objects), "rows": len(rows)}

    def step(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.store is not None
        count, iteration = request["count"], request["iteration"]
        changes = {
            self.seen[(iteration * count + offset) % len(self.seen)]: rfc3339_from_ns(
                EPOCH_NS + 10**18 + iteration * 1000 + offset
            )
            for offset in range(count)
        }
        text = json.dumps(changes, sort_keys=True, separators=(",", ":")).encode()
        started = time.perf_counter()
        try:
            self.store.batch(changes)
        except Exception as error:  # reported, e.g. etcd's NOSPACE
            leaves = error.exceptions if isinstance(error, ExceptionGroup) else [error]
            return {"error": ",".join(sorted({type(leaf).__name__ for leaf in leaves}))}
        ms = (time.perf_counter() - started) * 1000
        if self.prepare:
            self.store.prepare_compactions()
        return {"change_bytes": len(gzip.compress(text, 9, mtime=0)), "ms": ms}


def main() -> int:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    worker = Worker()
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "close":
            print(json.dumps({}), flush=True)
            return 0
        answer = worker.open(request) if op == "open" else worker.step(request)
        print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
