"""`checkpoint-runtime run`: one lifecycle of the collector runtime.

    config -> HTTP (health, metrics) -> [elect on the Lease] -> open the store (migration
    included) -> take ownership of the shards -> collectors + debounced persist while leading
    -> SIGTERM: stop collectors, flush, release the Lease.

A lifecycle never repairs itself in place: losing the Lease, a conflict or a write-uncertain
outcome stops the collectors and exits non-zero, so Kubernetes restarts the process and it
reopens from the authoritative API state. Exit codes: 0 clean shutdown, 2 a named error (an
invalid configuration, refused before anything touched the store or the API, or a lifecycle
that ended on an error), logged as a JSON line whose "error" field names it; 3 a bug.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, Any

from checkpoint_runtime.errors import CheckpointError, ExitCode, UsageError, quote
from checkpoint_runtime.runtime import logs, projection, startup
from checkpoint_runtime.runtime.settings import load_document

if TYPE_CHECKING:
    from checkpoint_runtime.runtime.lifecycle import Runtime
    from checkpoint_runtime.runtime.projection import MemoryProjection, ShardProjection
    from checkpoint_runtime.runtime.settings import RuntimeSettings

log = logging.getLogger("checkpoint_runtime.runtime")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the collectors with checkpoints in the configured store",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--config", help="runtime config JSON (default: the embedded file store)")
    parser.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, in-cluster)")
    parser.add_argument(
        "--identity", help="leader-election identity (default: $POD_NAME + a random suffix)"
    )
    parser.add_argument(
        "--http-port", type=http_port, help="override http.port of the config (0: any free port)"
    )
    parser.add_argument(
        "--bind",
        metavar="ADDRESS",
        help="override http.bindAddress of the config: the IP address the HTTP listener binds "
        "(default 0.0.0.0, all IPv4 interfaces; 127.0.0.1 keeps it on this host)",
    )
    parser.add_argument(
        "--check-config",
        action="store_true",
        help="only run the checks `run` makes before it starts (schema, limits, shard size "
        "projection, installed extras, store and sink paths, HTTP port), print the projected "
        "shards and exit: 0 accepted, 2 refused; touches nothing",
    )
    parser.set_defaults(func=main)


def http_port(text: str) -> int:
    """A --http-port: 0 (any free port) to 65535."""
    try:
        port = int(text)
    except ValueError:
        raise UsageError("--http-port", f"{text[:40]!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise UsageError("--http-port", f"{port} is not between 0 and 65535")
    return port


def preflight(
    args: argparse.Namespace,
) -> tuple[RuntimeSettings, list[ShardProjection], MemoryProjection]:
    """Everything `run` checks before it opens the store or starts a collector; the same for
    `--check-config`. Raises a named error (ConfigError and its kinds)."""
    # A config whose shard could not fit, or whose state the container's memory limit could
    # not hold, is refused now, naming the knob.
    document = with_bind(load_document(args.config), args.bind)
    limit = startup.container_memory_limit()
    settings, projections = startup.check(document, limit)
    for index, collector in enumerate(settings.collectors):
        process_check = settings.kinds.kind(collector.kind).process_check
        if process_check is not None:
            process_check(collector, f"collectors[{index}]")
    startup.check_paths(settings)
    return settings, projections, projection.memory(projections, limit)


def main(args: argparse.Namespace) -> int:
    logs.configure()
    try:
        settings, projections, memory = preflight(args)
    except CheckpointError as error:
        return logs.refused(log, error)
    for shard in projections:
        log.info(
            "projected shard",
            extra={"shard": shard.shard, "bytes": shard.compressed_bytes, "knob": shard.knob},
        )
    log.info(
        "projected memory",
        extra={"bytes": memory.projected_bytes, "limit_bytes": memory.limit_bytes},
    )
    if args.check_config:
        for shard in projections:
            print(f"{shard.shard}: {shard.compressed_bytes} bytes projected ({shard.knob})")
        print(f"memory: projected at {memory.summary()}")
        print(f"config accepted: {len(settings.collectors)} collector(s)")
        return ExitCode.OK
    # The lifecycle (HTTP, metrics, election, the store backends) only once the config is
    # accepted and the runtime starts: `--check-config` needs none of it.
    from checkpoint_runtime.election.elector import default_identity
    from checkpoint_runtime.election.foreign import valid_identity
    from checkpoint_runtime.runtime.lifecycle import Runtime

    identity = args.identity or default_identity(os.environ.get("POD_NAME"))
    if not valid_identity(identity):
        # its replicas would take this holder for a foreign one (election/foreign.py)
        return logs.refused(
            log,
            UsageError(
                "--identity",
                f"{quote(identity)} is not a pod name (lowercase letters, digits, '-', '.'), "
                "optionally followed by _ and 8 hex digits",
            ),
        )
    runtime = Runtime(settings, identity=identity, kubeconfig=args.kubeconfig)
    if args.http_port is not None:
        runtime.http_port = args.http_port
    with _signals_stop(runtime):
        return runtime.run()


def with_bind(document: dict[str, Any], bind: str | None) -> dict[str, Any]:
    """The config with --bind applied to http.bindAddress (a non-object http is left to the
    schema check to name)."""
    http = document.get("http", {})
    if bind is None or not isinstance(http, dict):
        return document
    return {**document, "http": {**http, "bindAddress": bind}}


@contextmanager
def _signals_stop(runtime: Runtime) -> Iterator[None]:
    def handle(signum: int, frame: FrameType | None) -> None:
        log.info("received %s: shutting down", signal.Signals(signum).name)
        runtime.request_shutdown()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
