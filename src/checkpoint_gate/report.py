"""docs/rbac.md for security reviewers: every RBAC rule the chart can render, and why.

The report is generated from renders, not written by hand: the chart is rendered over its value
matrix (defaults, every ci/*-values.yaml, the file store, rbac off) and every permission found
in a rendered Role is listed with the store operation that needs it and the reason it cannot be
narrower. A permission without an entry in `PURPOSES` is printed as unexplained, so a
template change that widens the Role shows up in review as a diff of this file.

Deterministic: no timestamps, sorted tables; `just gen` leaves no diff.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from checkpoint_gate.manifests import Json
from checkpoint_gate.render import DEFAULT_RELEASE, SdkRenderer
from checkpoint_gate.threats import threat_section

REPORT_PATH = Path("docs/rbac.md")
CHART = Path("charts/checkpoint-runtime")
CI_VALUES = Path("ci")
LEASE_PLACEHOLDER = "<leaseName>"
# rbac.scope=names pins ConfigMaps to the shard names of the configured collectors (and the
# legacy ConfigMap), which differ per values document.
SHARDS_PLACEHOLDER = "<shard names, legacy ConfigMap>"
PLACEHOLDERS = {"leases": LEASE_PLACEHOLDER, "configmaps": SHARDS_PLACEHOLDER}
# A namespace that cannot be mistaken for the "default" ServiceAccount in the placement table.
REPORT_NAMESPACE = "apps"


@dataclass(frozen=True)
class Purpose:
    summary: str  # a few words, for tables
    operation: str
    why_not_narrower: str


# (apiGroup, resource, verb, pinned) -> what the store does with it and why it is this wide.
PURPOSES: dict[tuple[str, str, str, bool], Purpose] = {
    ("", "configmaps", "get", False): Purpose(
        "read a shard back (open, uncertain write)",
        "Read one shard back: on open, and to resolve an uncertain write by recognising its "
        "write id.",
        "Shard names are derived from the Lease name and a hash of each collector namespace, "
        "so the set grows with the config; resourceNames match exact names only, with no "
        "prefix or wildcard. rbac.scope=names pins it to the configured collectors' shards.",
    ),
    ("", "configmaps", "get", True): Purpose(
        "read a configured shard by name (names scope)",
        "rbac.scope=names: discover the shards by reading each configured collector's shard "
        "(and its chunk slots) by name on open (no list), read one back to resolve an "
        "uncertain write, and read the legacy ConfigMap to migrate it.",
        "Already as narrow as RBAC allows: pinned to the names the runtime derives from "
        "checkpoint.collectors, and the legacy ConfigMap's.",
    ),
    ("", "configmaps", "update", True): Purpose(
        "guarded write of a configured shard (names scope)",
        "rbac.scope=names: every later write of a configured shard, guarded by its "
        "resourceVersion, and the marker on the legacy ConfigMap once migration is durable.",
        "Already as narrow as RBAC allows: pinned to the same names as get.",
    ),
    ("", "configmaps", "list", False): Purpose(
        "discover shards by label",
        "Discover the store's shards by label selector on open.",
        "list restricted by resourceNames works only with an exact metadata.name field "
        "selector, which discovery does not have: it is looking for names it does not know yet.",
    ),
    ("", "configmaps", "create", False): Purpose(
        "first write of a new shard",
        "First write of a shard that does not exist yet (a new collector), and the shards "
        "written by legacy migration.",
        "RBAC cannot restrict create by resourceNames: the object has no name at "
        "authorization time.",
    ),
    ("", "configmaps", "update", False): Purpose(
        "guarded shard write, legacy migration marker",
        "Every later shard write, guarded by the shard's resourceVersion, and the marker "
        "written on the legacy ConfigMap once migration is durable.",
        "Same as get: shard names are hashes that depend on the config, and there is no prefix "
        "matching in resourceNames.",
    ),
    ("coordination.k8s.io", "leases", "get", True): Purpose(
        "leader election: read the Lease",
        "Leader election: read the Lease to see who holds it and whether it expired.",
        "Already as narrow as RBAC allows: pinned to the one Lease name.",
    ),
    ("coordination.k8s.io", "leases", "update", True): Purpose(
        "leader election: renew or take over",
        "Leader election: renew the Lease, or take it over once it expired.",
        "Already as narrow as RBAC allows: pinned to the one Lease name.",
    ),
    ("coordination.k8s.io", "leases", "create", False): Purpose(
        "leader election: first election",
        "Leader election: the first election creates the Lease.",
        "RBAC cannot restrict create by resourceNames, so this rule is kept apart from the "
        "pinned get/update rule.",
    ),
}

NOT_GRANTED = (
    "delete, deletecollection, watch, patch, `*`, bind, escalate, impersonate; any other "
    "resource (secrets, pods, ...); any ClusterRole or ClusterRoleBinding."
)


def value_matrix(root: Path) -> list[tuple[str, Json]]:
    """The values documents the report renders, named as a reviewer would recognise them."""
    matrix: list[tuple[str, Json]] = [("defaults", {})]
    for path in sorted((root / CI_VALUES).glob("*-values.yaml")):
        matrix.append((f"ci/{path.name}", yaml.safe_load(path.read_text(encoding="utf-8")) or {}))
    matrix.append(("checkpoint.store.backend=file", {"checkpoint": {"store": {"backend": "file"}}}))
    matrix.append(("rbac.create=false", {"rbac": {"create": False}}))
    return matrix


@dataclass(frozen=True)
class RenderedRole:
    values: str
    role: Json | None
    binding: Json | None
    admission: Json | None = None  # the ValidatingAdmissionPolicy (admissionPolicy.enabled)


def rendered_roles(root: Path) -> list[RenderedRole]:
    renderer = SdkRenderer(root / CHART)
    rows: list[RenderedRole] = []
    for name, values in value_matrix(root):
        manifests = renderer.render(values, release=DEFAULT_RELEASE, namespace=REPORT_NAMESPACE)
        role = next((m.document for m in manifests if m.kind == "Role"), None)
        binding = next((m.document for m in manifests if m.kind == "RoleBinding"), None)
        admission = next(
            (m.document for m in manifests if m.kind == "ValidatingAdmissionPolicy"), None
        )
        rows.append(RenderedRole(name, role, binding, admission))
    return rows


def permissions(role: Json) -> set[tuple[str, str, str, str]]:
    """(apiGroup, resource, verb, resourceName or "") for every grant of a Role."""
    found: set[tuple[str, str, str, str]] = set()
    for rule in role.get("rules", []):
        names = rule.get("resourceNames") or [""]
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    found.update((group, resource, verb, name) for name in names)
    return found


VERB_ORDER = ("get", "list", "create", "update")


def _sort_key(key: tuple[str, str, str, bool]) -> tuple[str, str, int, str]:
    group, resource, verb, _ = key
    order = VERB_ORDER.index(verb) if verb in VERB_ORDER else len(VERB_ORDER)
    return (group, resource, order, verb)


def render_report(rows: Iterable[RenderedRole]) -> str:
    rows = list(rows)
    grants: dict[tuple[str, str, str, bool], set[str]] = {}
    for row in rows:
        if row.role is None:
            continue
        for group, resource, verb, name in permissions(row.role):
            grants.setdefault((group, resource, verb, bool(name)), set()).add(row.values)
    everywhere = {row.values for row in rows if row.role is not None}

    lines = [
        "# RBAC of the checkpoint-runtime chart",
        "",
        "Generated by `just gen` (`checkpoint_gate.report`) from renders of the chart; do not",
        "edit by hand. Every permission any of the values below renders is listed, with the store",
        "operation that needs it and why it cannot be narrower. The policy gate",
        "(`policy/rbac.rego`, rule RBAC-3) denies any render whose Role differs from this set.",
        "",
        "## Permissions",
        "",
        "One namespaced Role in the coordination namespace, bound by one RoleBinding to the"
        " chart's",
        "ServiceAccount only.",
        "",
        "| API group | resource | verb | resourceNames | store operation"
        " | why it cannot be narrower | rendered by |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in sorted(grants, key=_sort_key):
        group, resource, verb, pinned = key
        purpose = PURPOSES.get(key)
        operation = purpose.operation if purpose else "**unexplained: no store operation needs it**"
        why = purpose.why_not_narrower if purpose else "**review this rule**"
        rendered_by = (
            "every values document that renders a Role"
            if grants[key] == everywhere
            else (", ".join(sorted(grants[key])))
        )
        names = f"`{PLACEHOLDERS.get(resource, '<names>')}`" if pinned else "any"
        lines.append(
            f"| `{group or 'core'}` | `{resource}` | `{verb}` | {names} | {operation} | {why} | "
            f"{rendered_by} |"
        )
    lines += [
        "",
        f"Never granted, for any valid values: {NOT_GRANTED}",
        "",
        "## Where the Role lands",
        "",
        f"Rendered as release `{DEFAULT_RELEASE}` in namespace `{REPORT_NAMESPACE}`.",
        "",
        "| values | Role | namespace | Lease pinned | ConfigMaps pinned | bound to |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(_placement(row))
    lines += _admission_section(rows)
    lines += threat_section()
    lines.append("")
    return "\n".join(lines)


def _admission_section(rows: list[RenderedRole]) -> list[str]:
    """What the opt-in ValidatingAdmissionPolicy narrows, per values document that renders it."""
    lines = [
        "",
        "## What the admission policy narrows (`admissionPolicy.enabled`)",
        "",
        "A ValidatingAdmissionPolicy and its binding (cluster-scoped admission objects, not RBAC:",
        "they grant nothing) refuse, for the chart's ServiceAccount only, the writes the Role",
        "cannot pin by name (policy `policy/admission.rego`, rule RBAC-11). A second policy,",
        "`<name>.reserved`, reserves the same names (and the store's Lease) for that account",
        "against every other identity in the coordination namespace: the table after this one.",
        "",
        "| values | policy | matches | ConfigMap create | ConfigMap update | Lease create |",
        "|---|---|---|---|---|---|",
    ]
    rendered = [row for row in rows if row.admission is not None]
    for row in rendered:
        policy: Json = row.admission or {}
        spec: dict[str, Any] = policy.get("spec", {})
        variables = {item["name"]: item["expression"] for item in spec.get("variables", [])}
        heads = ", ".join(f"`{name}`" for name in json.loads(variables.get("heads", "[]")))
        chunks = variables.get("maxChunks", "?")
        legacy = json.loads(variables.get("legacy", '""'))
        (condition,) = spec.get("matchConditions", [{}])
        account = str(condition.get("expression", "")).rpartition("==")[2].strip().strip('"')
        lease = json.loads(variables.get("lease", '""'))
        update = "only objects carrying the store's labels before and after"
        if legacy:
            update += f", and `{legacy}`"
        lines.append(
            f"| {row.values} | `{policy.get('metadata', {}).get('name', '')}` | `{account}` | "
            f"{heads or 'none'} and their chunk slots `<head>-c<a or b><0..{int(chunks) - 1}>`,"
            f" with the store's labels | {update} | "
            f"`{lease}` only |"
        )
    if not rendered:
        lines.append("| none of the values above | - | - | - | - | - |")
    return lines


def _placement(row: RenderedRole) -> str:
    if row.role is None:
        return f"| {row.values} | none | - | - | - | - |"
    metadata: dict[str, Any] = row.role.get("metadata", {})
    grants = permissions(row.role)
    leases = sorted({name for _, resource, _, name in grants if name and resource == "leases"})
    configmaps = sorted({n for _, resource, _, n in grants if n and resource == "configmaps"})
    pinned = _pinned_names(configmaps) or "none (every name)"
    subjects = (row.binding or {}).get("subjects", [])
    bound = (
        ", ".join(f"{s.get('kind')} {s.get('namespace', '')}/{s.get('name')}" for s in subjects)
        or "no RoleBinding"
    )
    return (
        f"| {row.values} | `{metadata.get('name', '')}` | `{metadata.get('namespace', '')}` | "
        f"{', '.join(f'`{lease}`' for lease in leases) or '-'} | {pinned} | {bound} |"
    )


_CHUNK_SLOT = re.compile(r"^(?P<head>.+)-c(?P<generation>[ab])(?P<index>\d+)$")


def _pinned_names(names: list[str]) -> str:
    """Pinned names, each shard's chunk slots summed up after its head (2 x maxChunks each)."""
    slots: dict[str, int] = {}
    shown = []
    for name in names:
        match = _CHUNK_SLOT.match(name)
        if match is not None and match["head"] in names:
            slots[match["head"]] = slots.get(match["head"], 0) + 1
        else:
            shown.append(name)
    return ", ".join(
        f"`{name}`" + (f" (+ {slots[name]} chunk slots `-ca0`...)" if name in slots else "")
        for name in shown
    )


def write_rbac_report(root: Path) -> None:
    """Regenerate docs/rbac.md under `root` (written only when its content changes)."""
    content = render_report(rendered_roles(root))
    path = root / REPORT_PATH
    if path.exists() and path.read_text(encoding="utf-8") == content:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
