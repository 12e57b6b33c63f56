"""`just bench-render`: values documents per second through render + schema + policy.

Two pipelines side by side, in one run, on the same values documents (the defaults, each
ci/*-values.yaml, and a few generated variants):
- in-process: Helm SDK render, jsonschema, strict Kubernetes schemas, compiled regopy policies;
- subprocess: `helm template` per document, then the same checks.
The policies and schemas are compiled once per pipeline; only the per-document work is timed.
Prints a table; asserts nothing (performance is measured here, never in tests).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import yaml

from checkpoint_runtime.gate.engine import Mode
from checkpoint_runtime.gate.paths import CHART_DIR, CI_VALUES_DIR
from checkpoint_runtime.gate.pipeline import Gate
from checkpoint_runtime.gate.render import CliRenderer, SdkRenderer
from checkpoint_testenv import binaries


def documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = [{}]
    for path in sorted(CI_VALUES_DIR.glob("*-values.yaml")):
        docs.append(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    for replicas in (1, 3):
        docs.append({"replicaCount": replicas, "podDisruptionBudget": {"enabled": True}})
    return docs


def timed(
    label: str, step: Callable[[dict[str, Any]], object], docs: list[dict[str, Any]], rounds: int
) -> dict[str, Any]:
    per_doc: list[float] = []
    start = time.perf_counter()
    for _ in range(rounds):
        for values in docs:
            t0 = time.perf_counter()
            step(values)
            per_doc.append(time.perf_counter() - t0)
    total = time.perf_counter() - start
    return {
        "label": label,
        "docs": len(per_doc),
        "per_second": len(per_doc) / total,
        "median_ms": statistics.median(per_doc) * 1000,
        "p95_ms": sorted(per_doc)[int(len(per_doc) * 0.95) - 1] * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="passes over the documents")
    args = parser.parse_args()
    docs = documents()

    sdk_gate = Gate()  # in-process SDK renderer
    cli_gate = Gate(CliRenderer(CHART_DIR, binaries.locate() / "helm"))
    sdk = SdkRenderer(CHART_DIR)
    for gate in (sdk_gate, cli_gate):  # warm caches (schema validators, first render)
        gate.run({})

    def render_only(values: dict[str, Any]) -> object:
        return sdk.render(values)

    def policy_only_combined(values: dict[str, Any]) -> object:
        return sdk_gate.policies.evaluate(sdk.render(values), [Mode.COMBINED])

    rows = [
        timed("in-process: SDK render only", render_only, docs, args.rounds),
        timed("in-process: SDK render + combined policy", policy_only_combined, docs, args.rounds),
        timed("in-process: SDK + schema + k8s + policy (gate)", sdk_gate.run, docs, args.rounds),
        timed("subprocess: helm template + same checks (gate)", cli_gate.run, docs, args.rounds),
    ]
    width = max(len(row["label"]) for row in rows)
    print(f"values documents: {len(docs)} distinct x {args.rounds} rounds")
    print(f"{'pipeline':<{width}}  {'docs':>5}  {'docs/s':>8}  {'median ms':>9}  {'p95 ms':>8}")
    for row in rows:
        print(
            f"{row['label']:<{width}}  {row['docs']:>5}  {row['per_second']:>8.1f}  "
            f"{row['median_ms']:>9.1f}  {row['p95_ms']:>8.1f}"
        )
    sdk_rate, cli_rate = rows[2]["per_second"], rows[3]["per_second"]
    print(f"in-process gate is {sdk_rate / cli_rate:.1f}x the helm-template gate")


if __name__ == "__main__":
    main()
