"""Faults through the proxy and the server processes (SPEC §7; issue 7, scenario 2).

Each case: a store (as the chart's ServiceAccount, through a fault proxy) has an acknowledged
shard (v1); the fault is injected; the store writes v2 with one `batch`. The outcome must be
a recognised commit (`batch` returned) or a surfaced named error, never another exception.
Then the faults are cleared, the servers are up again, and:

- the API state is v1 or v2 (the acknowledged v1 is never lost), and v2 if `batch` returned;
- a fresh store reads exactly the API state (it restarts from the authoritative state);
- that fresh store can write again (v3 is acknowledged and stored).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from rel_support import is_named, leaf_errors

from checkpoint_runtime.store.core import Store
from checkpoint_testenv.controlplane import ControlPlane
from checkpoint_testenv.faultproxy import Action, FaultProxy
from checkpoint_testenv.support.kubetarget import KubeTarget, StoredState
from checkpoint_testenv.support.polling import wait_for, wait_settled

FEED = "tn/objectstore/feed-a"
NEW_FEED = "tn/objectstore/feed-new"
CURSOR = f"{FEED}/cursor"
COMMIT = "commit"
SETTLE_QUIET, SETTLE_LIMIT = 0.5, 30.0


@dataclass(frozen=True)
class FaultCase:
    """One fault, the store options it runs with, and the outcome SPEC §7 implies."""

    name: str
    description: str
    expected: tuple[str, ...]
    """Accepted outcomes: `commit`, `opened`, or `error:<ErrorType>` (leaf types surfaced)."""
    deadline: float = 30.0
    request_timeout: float = 10.0
    create: bool = False
    """The write creates a new shard (POST) instead of updating one (PUT)."""
    settle: float = 0.0
    """Seconds to wait after the write for answers the proxy still holds (a stall: the request
    was forwarded, its answer is held)."""
    delayed: bool = False
    """The proxy holds a request before forwarding it: after the write, wait until it has
    forwarded it and relayed the server's answer (its event), not a fixed time."""
    soak_only: str = ""
    """Why the case runs only in the soak (e.g. its outcome depends on server timing); empty:
    it runs in CI too. The CI test reports it as skipped with this reason."""


@dataclass(frozen=True)
class CaseResult:
    case: str
    outcome: str
    stored: str
    """Which value the API holds afterwards: v1, v2 (or `-` for the open case)."""
    seconds: float
    requests: int
    """Requests the store sent through the proxy for the faulted operation."""


CASES = [
    FaultCase(
        "drop-response-update",
        "PUT forwarded and committed, the answer dropped (FIN)",
        (COMMIT,),
    ),
    FaultCase(
        "drop-response-create",
        "POST forwarded and committed, the answer dropped (FIN)",
        (COMMIT,),
        create=True,
    ),
    FaultCase("reset-before-update", "PUT reset before it reaches the server", (COMMIT,)),
    FaultCase(
        "reset-before-create", "POST reset before it reaches the server", (COMMIT,), create=True
    ),
    FaultCase("reset-after-update", "PUT committed, then the connection reset (RST)", (COMMIT,)),
    FaultCase(
        "stall-within-deadline",
        "PUT committed, its answer held 2 s (request timeout 1 s, deadline 30 s)",
        (COMMIT,),
        request_timeout=1.0,
    ),
    FaultCase(
        "stall-past-deadline",
        "PUT committed, answer and every read-back held past the 2 s deadline",
        ("error:WriteUncertainError",),
        deadline=2.0,
        settle=1.0,
    ),
    FaultCase(
        "late-duplicate",
        "PUT delayed 2 s in the proxy (1 s request timeout): re-sent, the late original 409s",
        (COMMIT,),
        request_timeout=1.0,
        delayed=True,
    ),
    FaultCase(
        "delay-past-deadline",
        "PUT delayed past the 2 s deadline, forwarded afterwards",
        ("error:WriteUncertainError",),
        deadline=2.0,
        delayed=True,
    ),
    FaultCase(
        "open-list-reset",
        "the discovery LIST during open reset twice",
        ("opened",),
    ),
    FaultCase(
        "apiserver-killed-then-restarted",
        "kube-apiserver SIGKILLed before the write, restarted while the store retries "
        "(traffic gated until /readyz, as a load balancer would)",
        (COMMIT,),
    ),
    FaultCase(
        "apiserver-killed-in-flight",
        "kube-apiserver SIGKILLed while the proxy holds the PUT, restarted (gated until ready)",
        (COMMIT,),
    ),
    FaultCase(
        "apiserver-restart-ungated",
        "kube-apiserver SIGKILLed and restarted with no gate: the store may reach it before "
        "its RBAC cache is synced (403 on the read-back, which it keeps resolving)",
        (COMMIT,),
        soak_only="soak only: whether the read-back meets the 403 window of a restarted server "
        "before its RBAC cache syncs depends on server timing",
    ),
    FaultCase(
        "apiserver-down-past-deadline",
        "kube-apiserver down for longer than the 3 s deadline",
        ("error:WriteUncertainError",),
        deadline=3.0,
    ),
    FaultCase(
        "etcd-killed-then-restarted",
        "etcd SIGKILLed before the write, restarted while the store retries",
        (COMMIT,),
    ),
    FaultCase(
        "etcd-down-past-deadline",
        "etcd down for longer than the 3 s deadline",
        ("error:WriteUncertainError",),
        deadline=3.0,
    ),
]
CASES_BY_NAME = {case.name: case for case in CASES}


def _outcome(error: BaseException | None) -> str:
    if error is None:
        return COMMIT
    if not is_named(error):
        leaves = ", ".join(f"{type(e).__name__}: {e}" for e in leaf_errors(error))
        return f"UNNAMED {leaves}"
    return "error:" + "+".join(sorted({type(e).__name__ for e in leaf_errors(error)}))


class FaultRunner:
    """Runs fault cases against one control plane; restores the servers after each case."""

    def __init__(
        self, plane: ControlPlane, target: KubeTarget, make_proxy: Callable[[], FaultProxy]
    ) -> None:
        self.plane = plane
        self.target = target
        self.make_proxy = make_proxy

    def run(self, case: FaultCase) -> CaseResult:
        proxy = self.make_proxy()
        lease = self.target.fresh_lease("fault")
        try:
            return self._run(case, proxy, lease)
        finally:
            proxy.passthrough()
            self._servers_up()
            self.target.close()

    def _servers_up(self) -> None:
        if not self.plane.etcd_running:
            self.plane.start_etcd()
        if not self.plane.apiserver_running:
            self.plane.start_apiserver()

    def _store(self, case: FaultCase, proxy: FaultProxy, lease: str) -> Store:
        backend = self.target.backend(lease, host=proxy.host, request_timeout=case.request_timeout)
        return Store.open(backend, writer="leader-1", epoch=1, deadline_seconds=case.deadline)

    def _run(self, case: FaultCase, proxy: FaultProxy, lease: str) -> CaseResult:
        store = self._store(case, proxy, lease)
        store.batch({CURSOR: "v1"})
        key = f"{NEW_FEED}/cursor" if case.create else CURSOR
        before = len(proxy.events)
        started = time.monotonic()
        if case.name == "open-list-reset":
            proxy.reset_before_forward(count=2, method="GET")
            reopened = self._store(case, proxy, lease)
            outcome = "opened" if reopened.get(CURSOR) == "v1" else "opened-wrong-state"
            return CaseResult(
                case.name, outcome, "-", time.monotonic() - started, len(proxy.events) - before
            )
        error = self._inject_and_write(case, proxy, store, key)
        seconds = time.monotonic() - started
        requests = len(proxy.events) - before
        proxy.passthrough()
        self._servers_up()
        if case.delayed:
            wait_for(
                lambda: any(event.action is Action.DELAY for event in proxy.events[before:]),
                SETTLE_LIMIT,
                f"{case.name}: the delayed request forwarded and answered",
                interval=0.02,
            )
        time.sleep(case.settle)
        outcome = _outcome(error)
        stored = self._check_after(lease, key, acknowledged=error is None)
        return CaseResult(case.name, outcome, stored, seconds, requests)

    def _inject_and_write(
        self, case: FaultCase, proxy: FaultProxy, store: Store, key: str
    ) -> BaseException | None:
        method = "POST" if case.create else "PUT"
        name = case.name
        if name.startswith("drop-response"):
            proxy.drop_response_after_forward(count=1, method=method)
        elif name.startswith("reset-before"):
            proxy.reset_before_forward(count=1, method=method)
        elif name == "reset-after-update":
            proxy.reset_after_forward(count=1, method=method)
        elif name == "stall-within-deadline":
            proxy.stall(2.0, count=1, method=method)
        elif name == "stall-past-deadline":
            proxy.stall(case.deadline + 1.0, count=None)
        elif name == "late-duplicate":
            proxy.delay(2.0, count=1, method=method)
        elif name == "delay-past-deadline":
            proxy.delay(case.deadline + 0.5, count=1, method=method)
        elif name == "apiserver-killed-in-flight":
            proxy.delay(1.0, count=1, method=method)
            return self._write_while(store, key, lambda: self._kill_during_delay(proxy))
        elif name.startswith("apiserver"):
            self.plane.kill_apiserver()
            restart = {
                "apiserver-killed-then-restarted": lambda: self._restart_apiserver(proxy, 0.5),
                "apiserver-restart-ungated": lambda: self._restart_apiserver(None, 0.5),
            }.get(name)
            return self._write_while(store, key, restart)
        elif name.startswith("etcd"):
            self.plane.kill_etcd()
            restart = name == "etcd-killed-then-restarted"
            return self._write_while(store, key, self._restart_etcd_later if restart else None)
        return _attempt(store, key)

    def _write_while(
        self, store: Store, key: str, action: Callable[[], None] | None
    ) -> BaseException | None:
        """Write in a worker thread while the main thread acts on the server processes."""
        result: list[BaseException | None] = []
        worker = threading.Thread(target=lambda: result.append(_attempt(store, key)))
        worker.start()
        if action is not None:
            action()
        worker.join()
        return result[0]

    def _kill_during_delay(self, proxy: FaultProxy) -> None:
        time.sleep(0.4)  # the PUT is now held by the proxy's 1 s delay
        self.plane.kill_apiserver()
        self._restart_apiserver(proxy, 1.0)

    def _restart_apiserver(self, gate: FaultProxy | None, after: float) -> None:
        """Start kube-apiserver again; with a gate, reset every request until it is ready.

        A restarted kube-apiserver listens before its RBAC cache is synced and answers 403
        meanwhile; a load balancer's readiness check hides that window, the gate does too.
        """
        if gate is not None:
            gate.reset_before_forward(count=None)
        time.sleep(after)
        self.plane.start_apiserver()
        if gate is not None:
            gate.passthrough()

    def _restart_etcd_later(self) -> None:
        time.sleep(1.0)
        self.plane.start_etcd()

    def _settled(self, lease: str) -> dict[str, StoredState]:
        """The stored state once it stopped changing (a server may still commit a held write)."""
        return wait_settled(
            lambda: self.target.stored(lease), SETTLE_QUIET, SETTLE_LIMIT, "the stored state"
        )

    def _check_after(self, lease: str, key: str, acknowledged: bool) -> str:
        """The invariants after recovery; returns which value the API holds."""
        stored = self._settled(lease)
        value = stored.get(key.rsplit("/", 1)[0])
        current = None if value is None else value.rows.get(key)
        allowed = {"v2"} if acknowledged else {"v1" if key == CURSOR else None, "v2"}
        if current not in allowed:
            raise AssertionError(f"{key} holds {current!r} after recovery, allowed {allowed}")
        if stored[FEED].rows.get(CURSOR) != "v1" and key != CURSOR:
            raise AssertionError("the acknowledged v1 of an untouched shard was lost")
        fresh = Store.open(self.target.backend(lease), writer="leader-2", epoch=2)
        api_rows = {k: v for state in stored.values() for k, v in state.rows.items()}
        if dict(fresh.items()) != api_rows:
            raise AssertionError("a fresh store does not read the API state")
        fresh.take_ownership()
        fresh.batch({key: "v3"})
        after = self.target.stored(lease)[key.rsplit("/", 1)[0]].rows.get(key)
        if after != "v3":
            raise AssertionError(f"the restarted store could not write: {key} holds {after!r}")
        return "v2" if current == "v2" else ("v1" if current == "v1" else "none")


def _attempt(store: Store, key: str) -> BaseException | None:
    try:
        store.batch({key: "v2"})
    except BaseException as error:  # judged by the caller: named or not
        return error
    return None
