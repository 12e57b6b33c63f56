"""`just bench-render`: the render gate against the `helm template` + `conftest test` pipeline.

Both are timed on the same values documents (the defaults, each ci/*-values.yaml, and a few
variants), interleaved document by document so machine load hits both alike:
- in-process gate: `Gate.run` (Helm SDK render, values schema, strict Kubernetes schemas, the
  policies compiled to Wasm: every document alone and the combined release);
- CLI pipeline, what a platform team runs: `helm template` to a file, then `conftest test` and
  `conftest test --combine` on it (the pinned binaries of scripts/testenv).
A breakdown of the in-process gate's stages follows, then a one-shot comparison of CPU time:
`checkpoint-runtime gate --matrix` as a fresh process against the CLI pipeline over the same
values documents. Prints tables; asserts nothing (performance is measured here, never in tests).

    PYTHONPATH=scripts .venv/bin/python -m bench.render [--quick] [--rounds N]
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.report import Report, Table, Target, emit, parser
from checkpoint_gate.engine import Mode
from checkpoint_gate.paths import CHART_DIR, CI_VALUES_DIR, POLICY_DIR
from checkpoint_gate.pipeline import Gate
from checkpoint_testenv import binaries, policytools

Values = dict[str, Any]
RENDER_TARGET = 20.0  # in-process gate throughput against the CLI pipeline's
CLI = "CLI: helm template + conftest test + conftest test --combine"
GATE = "in-process gate (render, schemas, policies)"
OWN_PROCESS = True
"""all.py runs this benchmark in a process of its own: the in-process gate is timed in a fresh
interpreter, not in one holding every other benchmark's data."""


def documents() -> list[Values]:
    docs: list[Values] = [{}]
    for path in sorted(CI_VALUES_DIR.glob("*-values.yaml")):
        docs.append(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
    for replicas in (1, 3):
        docs.append({"replicaCount": replicas, "podDisruptionBudget": {"enabled": True}})
    return docs


class CliPipeline:
    """helm template > manifests.yaml; conftest test; conftest test --combine."""

    def __init__(self, helm: Path, conftest: Path, scratch: Path) -> None:
        self.helm, self.conftest, self.scratch = helm, conftest, scratch

    def commands(self, values_file: Path | None, manifests: Path) -> list[list[str]]:
        template = [str(self.helm), "template", "cr", str(CHART_DIR), "--namespace", "apps"]
        template += ["-f", str(values_file)] if values_file else []
        conftest = [str(self.conftest), "test", "--no-color", "-p", str(POLICY_DIR)]
        return [template, [*conftest, str(manifests)], [*conftest, "--combine", str(manifests)]]

    def run(self, values: Values) -> None:
        values_file = self.scratch / "values.json"
        values_file.write_text(json.dumps(values), encoding="utf-8")
        self.run_file(values_file, self.scratch / "manifests.yaml")

    def run_file(self, values_file: Path | None, manifests: Path) -> None:
        """Render `values_file` (None: the chart's defaults) into `manifests`, then check it."""
        template, *checks = self.commands(values_file, manifests)
        with manifests.open("w", encoding="utf-8") as out:
            subprocess.run(template, stdout=out, check=True)
        for command in checks:
            subprocess.run(command, stdout=subprocess.DEVNULL, check=False)


def interleaved(
    steps: dict[str, Callable[[Values], object]], docs: list[Values], rounds: int
) -> dict[str, list[float]]:
    """Seconds per document for each step, the steps alternating on every document."""
    times: dict[str, list[float]] = {label: [] for label in steps}
    for _ in range(rounds):
        for values in docs:
            for label, step in steps.items():
                start = time.perf_counter()
                step(values)
                times[label].append(time.perf_counter() - start)
    return times


def row(label: str, seconds: list[float], baseline: list[float]) -> list[str]:
    median = statistics.median(seconds) * 1000
    p95 = sorted(seconds)[max(0, int(len(seconds) * 0.95) - 1)] * 1000
    ratio = statistics.median(baseline) / statistics.median(seconds)
    return [
        label,
        str(len(seconds)),
        f"{len(seconds) / sum(seconds):.1f}",
        f"{median:.1f}",
        f"{p95:.1f}",
        f"{ratio:.1f}x",
    ]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_shot(pipeline: CliPipeline) -> tuple[float, float, float, float]:
    """(gate CPU s, gate wall s, pipeline CPU s, pipeline wall s) over the --matrix documents."""
    cpu, wall = children_cpu(), time.perf_counter()
    gate = [sys.executable, "-m", "checkpoint_runtime", "gate", "--matrix", "-q"]
    subprocess.run(gate, stdout=subprocess.DEVNULL, check=True)
    gate_cpu, gate_wall = children_cpu() - cpu, time.perf_counter() - wall
    files: list[Path | None] = [None, *sorted(CI_VALUES_DIR.glob("*-values.yaml"))]
    cpu, wall = children_cpu(), time.perf_counter()
    for values_file in files:
        pipeline.run_file(values_file, pipeline.scratch / "one-shot.yaml")
    return gate_cpu, gate_wall, children_cpu() - cpu, time.perf_counter() - wall


def stages(gate: Gate, pipeline: CliPipeline) -> dict[str, Callable[[Values], object]]:
    """The pipelines timed side by side: the CLI, the whole gate, and the gate's stages."""
    sdk = gate.renderer

    def render(values: Values) -> object:
        return sdk.render(values)

    def render_and_schema(values: Values) -> object:
        gate.schema.violations(gate._sdk.merged_values(values))
        return sdk.render(values)

    def kubernetes(values: Values) -> object:
        return gate.kubernetes_findings(sdk.render(values))

    def policies(values: Values) -> object:
        return gate.policies.evaluate(sdk.render(values), [Mode.DOCUMENT, Mode.COMBINED])

    return {
        CLI: pipeline.run,
        GATE: gate.run,
        "  stage: SDK render": render,
        "  stage: render + values schema": render_and_schema,
        "  stage: render + Kubernetes schemas": kubernetes,
        "  stage: render + policies (per document and combined)": policies,
    }


def measure(rounds: int) -> tuple[list[Values], dict[str, list[float]], tuple[float, ...]]:
    """(the documents, seconds per document of every pipeline, the one-shot CPU and wall)."""
    docs = documents()
    helm = binaries.locate() / "helm"
    with tempfile.TemporaryDirectory() as scratch:
        pipeline = CliPipeline(helm, policytools.conftest(), Path(scratch))
        gate = Gate()
        for values in docs[:2]:  # warm: first render, validators, Wasm instance
            gate.run(values)
            pipeline.run(values)
        times = interleaved(stages(gate, pipeline), docs, rounds)
        shot = one_shot(pipeline)
    return docs, times, shot


def _target(ratio: float) -> Target:
    met = ratio >= RENDER_TARGET
    why = (
        "from scripts/bench/render.py (its table below)."
        if met
        else f"missed: {ratio:g}x against {RENDER_TARGET:g}x ({RENDER_TARGET / ratio:.1f}x short); "
        "per-document times in render.py's table below."
    )
    return Target(
        "render gate", f"in-process >= {RENDER_TARGET:g}x the CLI pipeline", f"{ratio:g}x", met, why
    )


def run(quick: bool = False, rounds: int = 5) -> Report:
    """The render gate against the CLI pipeline (one round with `quick`)."""
    rounds = 1 if quick else rounds
    docs, times, (gate_cpu, gate_wall, cli_cpu, cli_wall) = measure(rounds)
    cli = times[CLI]
    ratio = round(statistics.median(cli) / statistics.median(times[GATE]), 1)
    pipelines = Table(
        f"Values documents: {len(docs)} distinct x {rounds} rounds, interleaved",
        ["pipeline", "docs", "docs/s", "median ms", "p95 ms", "vs CLI (median)"],
        [row(label, seconds, cli) for label, seconds in times.items()],
        [f"in-process gate is {ratio:.1f}x the helm template + conftest pipeline"],
    )
    matrix = 1 + len(list(CI_VALUES_DIR.glob("*-values.yaml")))
    one_shot_table = Table(
        f"One-shot over the {matrix} matrix values documents, CPU (user + sys) and wall time of "
        "the child processes",
        ["run", "CPU s", "wall s"],
        [
            [
                "`checkpoint-runtime gate --matrix` (one fresh process)",
                f"{gate_cpu:.2f}",
                f"{gate_wall:.2f}",
            ],
            [
                "helm template + conftest test + --combine, per document",
                f"{cli_cpu:.2f}",
                f"{cli_wall:.2f}",
            ],
        ],
        [f"one-shot CPU: the gate uses {cli_cpu / gate_cpu:.1f}x less than the CLI pipeline"],
    )
    return Report("Render gate", [pipelines, one_shot_table], [_target(ratio)])


def main(argv: Sequence[str] | None = None) -> int:
    found = parser(__doc__, "one round")
    found.add_argument("--rounds", type=int, default=5, help="passes over the documents")
    args = found.parse_args(argv)
    return emit(run(args.quick, args.rounds), args)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    sys.exit(main())
