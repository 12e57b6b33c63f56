"""What each identity can do to a store, per layout: the threat table of docs/rbac.md.

One source for the table and for the test that proves each of its cells on the real API server
(tests/testenv/test_threat_table.py: every attempt is sent as that identity with a real token,
as a server-side dry run, so authorization and admission judge it and nothing is changed).
"""

from __future__ import annotations

from enum import Enum


class Outcome(Enum):
    ALLOWED = "allowed"
    RBAC = "refused by RBAC"
    ADMISSION = "refused by the admission policy"


# The layouts: the store's release and a neighbour release, both installed with these values
# (the neighbour never with the admission policy; in "own namespace" the store's coordination
# namespace is one of its own, the neighbour's and the edit user's are the release namespace).
LAYOUTS: dict[str, str] = {
    "namespace": "`rbac.scope: namespace`",
    "names": "`rbac.scope: names`",
    "names+admission": "`names` + `admissionPolicy.enabled`",
    "own-namespace": "a coordination namespace of its own",
}

PRINCIPALS: dict[str, str] = {
    "store": "the store's ServiceAccount",
    "neighbour": "a neighbour release's ServiceAccount",
    "editor": "a user with `edit` on the namespace",
    "admin": "a cluster administrator (`system:masters`)",
}

# The attempts, each on the store's objects: its flow-log head (which exists), another of its
# heads (not written yet), its Lease (which exists: a create that passes authorization and
# admission comes back AlreadyExists, the proof that a squat before the store would succeed).
ATTEMPTS: dict[str, str] = {
    "read": "read a head",
    "squat-head": "create a head first (squat)",
    "forge-head": "overwrite a head (forge)",
    "delete-head": "delete a head",
    "squat-lease": "create the Lease first (squat)",
    "hold-lease": "take the Lease (hold it for years)",
    "delete-lease": "delete the Lease",
}

A, R, D = Outcome.ALLOWED, Outcome.RBAC, Outcome.ADMISSION


def _row(*outcomes: Outcome) -> dict[str, Outcome]:
    return dict(zip(ATTEMPTS, outcomes, strict=True))


# (layout, principal) -> attempt -> outcome. The store's own writes are its job; its Role never
# has delete. A neighbour's Role grants create unpinned (RBAC cannot pin it), and in namespace
# scope get/update on every ConfigMap. `edit` grants every verb on ConfigMaps and Leases.
EXPECTED: dict[tuple[str, str], dict[str, Outcome]] = {
    ("namespace", "store"): _row(A, A, A, R, A, A, R),
    ("namespace", "neighbour"): _row(A, A, A, R, A, R, R),
    ("namespace", "editor"): _row(A, A, A, A, A, A, A),
    ("namespace", "admin"): _row(A, A, A, A, A, A, A),
    ("names", "store"): _row(A, A, A, R, A, A, R),
    ("names", "neighbour"): _row(R, A, R, R, A, R, R),
    ("names", "editor"): _row(A, A, A, A, A, A, A),
    ("names", "admin"): _row(A, A, A, A, A, A, A),
    ("names+admission", "store"): _row(A, A, A, R, A, A, R),
    ("names+admission", "neighbour"): _row(R, D, R, R, D, R, R),
    ("names+admission", "editor"): _row(A, D, D, D, D, D, D),
    ("names+admission", "admin"): _row(A, A, A, A, A, A, A),
    ("own-namespace", "store"): _row(A, A, A, R, A, A, R),
    ("own-namespace", "neighbour"): _row(R, R, R, R, R, R, R),
    ("own-namespace", "editor"): _row(R, R, R, R, R, R, R),
    ("own-namespace", "admin"): _row(A, A, A, A, A, A, A),
}

# What a foreign head or Lease becomes where nothing refuses it: the store's own checks
# (documented in docs/store.md and tested with the runtime), not this table's.
DETECTED = {"squat-head", "forge-head", "squat-lease", "hold-lease"}


def cell(layout: str, principal: str) -> str:
    outcomes = EXPECTED[(layout, principal)]
    allowed = [a for a, o in outcomes.items() if o is Outcome.ALLOWED]
    if principal == "store":
        return "its own job (read, create, overwrite its objects, elect); never delete"
    if len(allowed) == len(outcomes):
        text = "everything"
    elif not allowed:
        text = "nothing"
    else:
        text = "; ".join(ATTEMPTS[a] for a in allowed)
    refused = sorted({o.value.removeprefix("refused by ") for o in outcomes.values() if o is not A})
    if refused and allowed:
        text += f"; the rest refused by {' and '.join(refused)}"
    elif refused:
        text += f" (refused by {' and '.join(refused)})"
    if principal != "admin":
        if any(a in DETECTED for a in allowed):
            text += (
                ". A head or Lease it writes is detected by the store as foreign (docs/store.md)"
            )
        if "delete-head" in allowed:
            text += "; a head it deletes takes the collector's state with it"
    return text


def threat_section() -> list[str]:
    """The docs/rbac.md section: one row per identity, one column per layout."""
    lines = [
        "",
        "## What each identity can do to the store",
        "",
        "Proven on the real API server with each identity's own token "
        "(tests/testenv/test_threat_table.py), each attempt a server-side dry run: "
        + ", ".join(ATTEMPTS.values())
        + ". The store's release and a neighbour release share the coordination namespace, "
        "except in the last column.",
        "",
        "| identity | " + " | ".join(LAYOUTS.values()) + " |",
        "|---|" + "---|" * len(LAYOUTS),
    ]
    for principal, described in PRINCIPALS.items():
        cells = [cell(layout, principal) for layout in LAYOUTS]
        lines.append(f"| {described} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "A cluster administrator can also remove the admission policy; members of "
        "`admissionPolicy.breakGlassGroup` may write the store's objects like an administrator "
        "(with their own RBAC), to recover a store a neighbour squatted.",
    ]
    return lines
