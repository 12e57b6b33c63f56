"""One lifecycle of the runtime process (`Runtime.run()` returns the exit code):

    HTTP (health, metrics) -> [elect on the Lease] -> open the store (migration included)
    -> take ownership of the shards -> collectors + debounced persist while leading
    -> stop: stop collectors, flush, release the Lease.

A lifecycle never repairs itself in place: losing the Lease, a conflict or a write-uncertain
outcome stops the collectors and exits non-zero, so Kubernetes restarts the process and it
reopens from the authoritative API state. Exit codes (errors.ExitCode): 0 clean shutdown,
2 a named error (the lifecycle ended on one, or the configuration was refused), 3 a bug (an
unexpected exception ended it); each is logged as a JSON line naming the error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from checkpoint_runtime.backends.base import Backend
from checkpoint_runtime.backends.file import FileBackend
from checkpoint_runtime.collectors import CheckpointMap, Collector
from checkpoint_runtime.collectors.runner import CollectorRunner
from checkpoint_runtime.collectors.sink import Sink, open_sink
from checkpoint_runtime.constants import LEADER_HEALTH_TOLERANCE_SECONDS
from checkpoint_runtime.election.elector import ElectionThread, LeaderElector, Term
from checkpoint_runtime.errors import (
    BucketLayoutError,
    CheckpointError,
    ConfigError,
    ExitCode,
    LeadershipLostError,
    leaves,
)
from checkpoint_runtime.retry import Deadline
from checkpoint_runtime.runtime import admission, logs, repair
from checkpoint_runtime.runtime.backend import lease_client, open_backend
from checkpoint_runtime.runtime.buckets import BucketLeadership
from checkpoint_runtime.runtime.guards import CountingCollector, LeaderGuardedMap
from checkpoint_runtime.runtime.http import HealthServer
from checkpoint_runtime.runtime.lease import lease_lock, vetting
from checkpoint_runtime.runtime.metrics import RuntimeMetrics
from checkpoint_runtime.runtime.settings import RuntimeSettings, configured_shards
from checkpoint_runtime.store.core import Store
from checkpoint_runtime.store.debounce import Debouncer
from checkpoint_runtime.store.seal import Sealing, key_bytes, new_store_key

if TYPE_CHECKING:
    from kubernetes import client

log = logging.getLogger("checkpoint_runtime.runtime")

_WAKE_SECONDS = 0.1


class _Lease(NamedTuple):
    """Where the elector runs: its own client and the coordination namespace."""

    api: client.ApiClient
    namespace: str


class Runtime:
    """One lifecycle; `run()` returns the exit code."""

    def __init__(
        self,
        settings: RuntimeSettings,
        *,
        identity: str,
        kubeconfig: str | None = None,
        kube_configuration: client.Configuration | None = None,
        sink: Sink | None = None,
    ) -> None:
        self.settings = settings
        self.identity = identity
        self.http_port = settings.http_port
        self._kubeconfig = kubeconfig
        self._kube_configuration = kube_configuration
        self._sink = sink
        self.metrics = RuntimeMetrics()
        self.phase = "starting"
        self._shutdown = threading.Event()
        self._wake = threading.Event()
        self._fatal: list[BaseException] = []
        self._election: ElectionThread | None = None
        self._buckets: BucketLeadership | None = None
        """With store.buckets > 1: the buckets this process leads (runtime/buckets.py)."""
        self._layout_error: BucketLayoutError | None = None
        self._foreign_heads: list[str] = []
        """Shards whose head the open refused as not the store's (their collectors do not run)."""
        self.http: HealthServer | None = None

    # ---- control ----------------------------------------------------------------------------

    def request_shutdown(self) -> None:
        self._shutdown.set()
        self._wake.set()

    def _on_fatal(self, error: BaseException) -> None:
        self._fatal.append(error)
        self._wake.set()

    def _wait(self, done: Callable[[], bool]) -> None:
        while not (done() or self._shutdown.is_set() or self._fatal):
            self._wake.wait(_WAKE_SECONDS)
            self._wake.clear()

    def _stopping(self) -> bool:
        return self._shutdown.is_set() or bool(self._fatal)

    def _pause(self, seconds: float) -> None:
        """Wait `seconds`, or less if asked to stop or a fatal error arrives."""
        end = time.monotonic() + seconds
        while not self._stopping():
            left = end - time.monotonic()
            if left <= 0:
                return
            self._wake.wait(min(left, _WAKE_SECONDS))
            self._wake.clear()

    # ---- probes -----------------------------------------------------------------------------

    def healthy(self) -> tuple[bool, str]:
        buckets = self._buckets
        if buckets is not None and not buckets.healthy(LEADER_HEALTH_TOLERANCE_SECONDS):
            return False, "a bucket's leader has not renewed its lease: stuck"
        election = self._election
        if election is not None and not election.elector.healthy(LEADER_HEALTH_TOLERANCE_SECONDS):
            return False, "leader has not renewed its lease: stuck"
        return True, f"ok ({self.phase})"

    def ready(self) -> tuple[bool, str]:
        """A standby is ready (a rollout need not wait on an election) once it has read the
        Lease it waits on, unless that Lease is not its store's: then it may never lead, and
        says why."""
        buckets = self._buckets
        if buckets is not None and self.phase in ("standby", "leading"):
            if buckets.rounds == 0:
                return False, "standby: no election round yet"
            if buckets.problem is not None:
                return False, f"leading no bucket: {buckets.problem}"
            refused = buckets.foreign_heads()
            if refused:
                heads = ", ".join(refused)
                return False, f"leading, but refused foreign shard heads (not collecting): {heads}"
            return True, f"{self.phase} (buckets {sorted(buckets.held)})"
        election = self._election
        foreign = None if election is None else election.elector.foreign
        layout = None if election is None else election.elector.layout_problem
        if self.phase == "standby" and layout is not None:
            return False, f"standby under another bucket layout: {layout}"
        if self.phase == "standby" and foreign is not None:
            return False, f"standby on a foreign lease: {foreign}"
        if self.phase == "standby" and election is not None and not election.elector.looked:
            return False, "standby: the lease was not read yet"
        if self.phase == "leading" and self._foreign_heads:
            heads = ", ".join(self._foreign_heads)
            return False, f"leading, but refused foreign shard heads (not collecting): {heads}"
        if self.phase in ("standby", "leading"):
            return True, self.phase
        return False, self.phase

    # ---- the lifecycle ----------------------------------------------------------------------

    def run(self) -> int:
        settings = self.settings
        log.info(
            "starting",
            extra={
                "identity": self.identity,
                "backend": settings.store.backend,
                "collectors": [c.namespace for c in settings.collectors],
            },
        )
        try:
            backend, lease = self._open_backend()
        except CheckpointError as error:
            return logs.refused(log, error)
        try:  # the guard the config says is on, proven before anything is read or elected
            self._check_admission_policy(backend)
        except CheckpointError as error:
            backend.close()
            return logs.refused(log, error)
        try:
            self.http = HealthServer(
                settings.http_bind,
                self.http_port,
                self.metrics.store.registry,
                self.healthy,
                self.ready,
            )
        except (OSError, OverflowError) as error:
            backend.close()
            where = f"{settings.http_bind}:{self.http_port}"
            return logs.refused(log, ConfigError("http.port", f"cannot serve on {where}: {error}"))
        self.http.start()
        log.info("serving /healthz /readyz /metrics", extra={"port": self.http.port})
        try:
            sink = self._sink or open_sink(settings.sink_kind, settings.sink_path)
        except OSError as error:
            self.http.stop()
            backend.close()
            return logs.refused(log, ConfigError("sink.path", f"cannot open it: {error}"))
        try:
            return self._lead_and_collect(backend, lease, sink)
        finally:
            self.phase = "stopped"
            sink.flush()
            if self._sink is None:
                sink.close()
            self.http.stop()
            backend.close()
            if lease is not None:
                lease.api.close()  # type: ignore[no-untyped-call]

    def _open_backend(self) -> tuple[Backend, _Lease | None]:
        """The store's backend, and the elector's client when it elects (kubernetes only).
        A kubernetes store's etcd-space series are served with the runtime's own."""
        backend = open_backend(
            self.settings.store,
            kubeconfig=self._kubeconfig,
            configuration=self._kube_configuration,
            metrics=self.metrics.store.registry,
            kinds=self.settings.kinds.shapes,
        )
        if isinstance(backend, FileBackend) or not self.settings.election_enabled:
            return backend, None
        return backend, _Lease(lease_client(backend), backend.namespace)

    def _check_admission_policy(self, backend: Backend) -> None:
        """With an admission policy in the config, prove the API server enforces it."""
        policy = self.settings.admission_policy
        if policy is None or isinstance(backend, FileBackend):
            return
        from checkpoint_runtime.backends.kubernetes import KubernetesBackend

        assert isinstance(backend, KubernetesBackend)
        admission.check_enforced(backend, policy, Deadline(self.settings.store.deadline_seconds))
        log.info("admission policy enforced", extra={"policy": policy})

    def _elect(self, lease: _Lease) -> Term | None:
        """Wait until we lead; our term, or None if asked to stop first."""
        store = self.settings.store
        namespace = lease.namespace
        lock = lease_lock(lease.api, namespace, store.lease_name, self.identity)
        timings = self.settings.timings
        shape = vetting(store.lease_name, int(timings.lease_duration))
        elector = LeaderElector(lock, timings, vetting=shape, layout=1)
        self.metrics.foreign_lease.set_function(lambda: float(elector.foreign is not None))
        self._election = ElectionThread(elector)
        self._election.start()
        self.phase = "standby"
        log.info("waiting for leadership", extra={"lease": f"{namespace}/{store.lease_name}"})
        election = self._election
        self._wait(lambda: election.elected.is_set() or election.lost.is_set())
        if not election.elected.is_set() or election.lost.is_set():
            return None
        term = elector.term()
        if term is None:  # elected, then lost before we looked
            self._on_fatal(LeadershipLostError("leadership lost right after it was acquired"))
            return None
        log.info("leading", extra={"epoch": term.epoch, "identity": self.identity})
        return term

    def _check_absent_shards(self, store: Store, backend: Backend) -> None:
        """A configured collector whose shard the open did not find must have no object under
        its shard's name either: one that exists but cannot be read as ours (empty, foreign,
        truncated) would make the collector re-emit everything and then fail to create it, on
        every restart. Reading it by name raises the named error instead."""
        deadline = store.new_deadline()
        found = store.shard_states()
        for collector in self.settings.collectors:
            if collector.namespace not in found and collector.namespace not in store.foreign:
                backend.read_shard(collector.namespace, deadline)

    def _sealing(self) -> tuple[Sealing | None, str]:
        """The seal of an elected store: the store key its Lease carries, or a new one (then
        returned too, to be recorded once every head is sealed with it: trust on first use).
        None without election (the file store: no Lease to keep a key, no neighbour)."""
        if self._election is None:
            return None, ""
        lock = self._election.elector.lock
        key = key_bytes(lock.store_key) if lock.store_key else None
        if key is not None:
            return Sealing(key, self.settings.store.lease_name), ""
        new_key = new_store_key()
        log.info(
            "the lease carries no store key: adopting the stored heads as they are and sealing "
            "them with a new key",
            extra={"lease": lock.describe()},
        )
        return Sealing(key_bytes(new_key) or b"", self.settings.store.lease_name, True), new_key

    def _refuse_foreign_heads(self, store: Store, backend: Backend) -> None:
        """Name every head the open refused (not sealed by this store): it is not read, its
        collector does not run, and the process is not ready until it is set aside."""
        self._foreign_heads = sorted(store.foreign)
        for shard, refused in sorted(store.foreign.items()):
            log.error(
                "%s. %s",
                refused,
                repair.hint(backend, shard),  # type: ignore[arg-type]
                extra={"error": type(refused).__name__, "shard": shard, "object": refused.name},
            )

    def _leading(self) -> bool:
        return self._election is None or self._election.elector.is_leader()

    def _lead_and_collect(self, backend: Backend, lease: _Lease | None, sink: Sink) -> int:
        settings = self.settings
        epoch, lease_uid = 0, ""
        if lease is not None and settings.store.buckets > 1:
            return self._lead_buckets(backend, lease, sink)
        if lease is not None:
            elected = self._elect(lease)
            if elected is None:
                return self._finish(None)
            epoch, lease_uid = elected.epoch, elected.lease_uid
        self.phase = "opening"
        sealing, new_key = self._sealing()
        try:
            store = Store.open(
                backend,
                writer=self.identity,
                epoch=epoch,
                deadline_seconds=settings.store.deadline_seconds,
                debounce_seconds=settings.store.debounce_seconds,
                metrics=self.metrics.store,
                shards=configured_shards(settings),
                lease_uid=lease_uid,
                max_chunks=settings.store.max_chunks,
                write_budget_bytes_per_second=settings.store.write_budget_bytes_per_second,
                kinds=settings.kinds.shapes,
                sealing=sealing,
            )
            self._refuse_foreign_heads(store, backend)
            self._check_absent_shards(store, backend)
            if self._election is not None:
                # before any collector runs; renew_above lets a leader of a recreated Lease
                # prove it leads and take over shards stamped under the old one.
                store.take_ownership(self._election.elector.renew_above)
                if new_key:  # every head is sealed with it now: only now may it be trusted
                    self._election.elector.record_store_key(new_key)
        except (CheckpointError, ExceptionGroup) as error:
            self._on_fatal(repair.with_repair(error, backend))
            return self._finish(None)
        if not self._leading():
            self._on_fatal(LeadershipLostError("lost leadership while opening the store"))
            return self._finish(store)
        self.metrics.store.leader.set(1)
        self.metrics.epoch.set_function(lambda: store.stamp.epoch)  # a raise shows at once
        self.metrics.quarantined.set_function(lambda: len(repair.quarantined_rows(store)))
        guarded = LeaderGuardedMap(store, self._leading)
        collectors = [
            CountingCollector(c, self.metrics, self._leading)
            for c in self._collectors(guarded, sink)
            if c.namespace not in store.foreign
        ]
        runner = CollectorRunner(collectors, self._on_fatal)
        persister = Debouncer(store, self._on_fatal, leading=self._leading)
        runner.start()
        persister.start()
        self.phase = "leading"
        log.info(
            "collecting",
            extra={"shards": len(store.shard_states()), "collectors": len(collectors)},
        )
        election = self._election
        self._wait(
            lambda: (
                election is not None
                and (election.lost.is_set() or election.elector.layout_problem is not None)
            )
        )
        if election is not None and not election.lost.is_set():
            problem = election.elector.layout_problem
            if problem is not None:  # stop, flush and release below: the new layout waits
                self._layout_error = BucketLayoutError(problem)
        self.phase = "stopping"
        runner.stop()
        persister.stop()
        return self._finish(store)

    def _lead_buckets(self, backend: Backend, lease: _Lease, sink: Sink) -> int:
        """Several buckets (runtime/buckets.py): election rounds until asked to stop or a
        fatal error, then every bucket handed over (stop, flush, release)."""
        buckets = BucketLeadership(
            self.settings,
            self.identity,
            self.metrics,
            backend,
            lease.api,
            lease.namespace,
            sink,
            self._on_fatal,
        )
        self._buckets = buckets
        self.phase = "standby"
        log.info(
            "leading buckets",
            extra={"buckets": buckets.buckets, "lease": f"{lease.namespace}/{buckets.lease_name}"},
        )

        def pause(seconds: float) -> None:
            self.phase = "leading" if buckets.held else "standby"
            self._pause(seconds)

        buckets.run(self._stopping, pause)
        self.phase = "stopping"
        errors = buckets.stop()
        code = ExitCode.OK
        if errors:
            self._fatal.extend(errors)
        if self._fatal:
            self._log_fatal()
            code = self._fatal_code()
        log.info("stopped", extra={"exit_code": code})
        return code

    def _collectors(self, store: CheckpointMap, sink: Sink) -> list[Collector]:
        kinds = self.settings.kinds
        return [kinds.kind(c.kind).build(store, sink, c) for c in self.settings.collectors]

    def _finish(self, store: Store | None) -> int:
        """Flush on a clean shutdown while still leading, then release; the exit code."""
        self.metrics.store.leader.set(0)
        code = ExitCode.OK
        election = self._election
        lost = election is not None and election.lost.is_set()
        if lost:
            log.error(
                "lost the lease: stopped writing; exiting to restart from the API state",
                extra={"error": LeadershipLostError.__name__},
            )
            code = ExitCode.ERROR
        if self._fatal:
            self._log_fatal()
            code = self._fatal_code()
        elif store is not None and not lost and self._leading():
            try:
                store.flush()
                log.info("flushed", extra={"shards": len(store.shard_states())})
            except (CheckpointError, ExceptionGroup) as error:
                self._fatal.append(error)
                self._log_fatal()
                code = self._fatal_code()
        if election is not None:
            election.stop(self.settings.timings.renew_deadline)
            if election.elector.release():
                log.info("released the lease")
        if self._layout_error is not None and code == ExitCode.OK:
            log.error(
                "handed over: %s",
                self._layout_error,
                extra={"error": BucketLayoutError.__name__},
            )
            code = ExitCode.ERROR
        log.info("stopped", extra={"exit_code": code})
        return code

    def _fatal_code(self) -> ExitCode:
        """2 when every error that ended the lifecycle is a named one, else 3 (a bug)."""
        named = all(
            isinstance(leaf, CheckpointError) for error in self._fatal for leaf in leaves(error)
        )
        return ExitCode.ERROR if named else ExitCode.BUG

    def _log_fatal(self) -> None:
        logs.lifecycle_ended(log, self._fatal)
