"""`just demo`: render the chart with its defaults, print the gate's verdict and the RBAC it grants.

A stand-in main job until the runtime runs: it shows what a platform team installs and what the
policy gate says about it.
"""

from __future__ import annotations

import sys

from checkpoint_runtime.gate.engine import Level
from checkpoint_runtime.gate.pipeline import Gate
from checkpoint_runtime.gate.report import PURPOSES, permissions

RELEASE, NAMESPACE = "cr", "apps"


def main() -> int:
    result = Gate().run({}, release=RELEASE, namespace=NAMESPACE)
    denies = [f for f in result.findings if f.level is Level.DENY]
    warns = [f for f in result.findings if f.level is Level.WARN]

    print(f"checkpoint-runtime chart, defaults, release {RELEASE} in namespace {NAMESPACE}")
    print(
        f"rendered {len(result.manifests)} objects: "
        + ", ".join(f"{m.kind}/{m.name}" for m in result.manifests)
    )
    print()
    print(f"gate verdict: {'DENIED' if denies else 'PASS'} ({len(denies)} deny, {len(warns)} warn)")
    for finding in denies + warns:
        print(f"  {finding.level.value.upper():4} {finding.message}")
    print()

    role = next((m for m in result.manifests if m.kind == "Role"), None)
    if role is None:
        print("RBAC: no Role rendered")
        return 1 if denies else 0
    namespace = role.document["metadata"]["namespace"]
    print(f"RBAC: Role {role.name} in namespace {namespace}")
    rows = sorted(permissions(role.document))
    header = ("resource", "verb", "resourceNames", "store operation")
    table = [header] + [
        (
            f"{resource}.{group}" if group else resource,
            verb,
            name or "any",
            PURPOSES[(group, resource, verb, bool(name))].summary
            if (group, resource, verb, bool(name)) in PURPOSES
            else "UNEXPECTED: not a permission the store needs",
        )
        for group, resource, verb, name in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(3)]
    for index, row in enumerate(table):
        print(
            "  "
            + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3]))
            + "  "
            + row[3]
        )
        if index == 0:
            print("  " + "  ".join("-" * w for w in widths) + "  " + "-" * 15)
    return 1 if denies else 0


if __name__ == "__main__":
    sys.exit(main())
