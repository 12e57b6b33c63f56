"""`checkpoint-runtime gate`: the render gate on your own values, for people and for CI.

    checkpoint-runtime gate -f my-values.yaml --set replicaCount=3 --junit-xml gate.xml

Values compose like `helm -f ... --set ...`. The chart is rendered (in-process Helm SDK, or the
helm CLI with --engine cli), the values are checked against values.schema.json, the manifests
against the Kubernetes schemas, the rendered runtime config through the runtime's own startup
check (what `checkpoint-runtime run` would refuse, named by its values key), and the policies
are evaluated. Every finding is printed with its rule and object; the exit status is 1 when
anything is denied, 2 when the values cannot be read (a one-line `error:` naming the file).
`--output -` prints the manifests the gate rendered (no separate helm needed).
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import Any, TextIO

from checkpoint_gate.engine import POLICY_WASM, Level
from checkpoint_gate.junit import write_junit_xml
from checkpoint_gate.manifests import Json, RenderError
from checkpoint_gate.output import manifests_yaml
from checkpoint_gate.paths import CHART_DIR, CI_VALUES_DIR
from checkpoint_gate.pipeline import Finding, Gate, GateResult
from checkpoint_gate.render import DEFAULT_NAMESPACE, DEFAULT_RELEASE, CliRenderer
from checkpoint_gate.values import load_values
from checkpoint_runtime.errors import CheckpointError, ConfigError


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gate",
        help="render the chart with your values and run the policy gate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("-f", "--values", action="append", type=Path, default=[], metavar="FILE")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--matrix",
        action="store_true",
        help="instead of one values document, gate the defaults and every ci/*-values.yaml",
    )
    parser.add_argument("--engine", choices=("sdk", "cli"), default="sdk")
    parser.add_argument("--helm", type=Path, help="helm binary for --engine cli")
    parser.add_argument("--release", default=DEFAULT_RELEASE)
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument("--chart", type=Path, default=CHART_DIR)
    parser.add_argument(
        "--policy",
        type=Path,
        default=POLICY_WASM,
        metavar="WASM",
        help="conftest policies compiled to Wasm with the gate's entrypoint (default: the shipped"
        " policies; see docs/gate.md to build your own)",
    )
    parser.add_argument("--junit-xml", type=Path, metavar="FILE")
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="also write the manifests the gate rendered (YAML, `# Source:` per object, as helm "
        "template prints them) to FILE; `-` prints them on stdout and the report on stderr",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print denies and totals only")
    parser.set_defaults(func=run)


def value_documents(args: argparse.Namespace) -> list[tuple[str, Json]]:
    if args.matrix:
        documents: list[tuple[str, Json]] = [("defaults", {})]
        for path in sorted(CI_VALUES_DIR.glob("*-values.yaml")):
            documents.append((path.name, load_values([path])))
        return documents
    names = [path.name for path in args.values] + [f"--set {s}" for s in args.set]
    return [(" + ".join(names) or "defaults", load_values(args.values, args.set))]


def run(args: argparse.Namespace) -> int:
    try:
        documents = value_documents(args)
        renderer = CliRenderer(args.chart, args.helm) if args.engine == "cli" else None
        gate = Gate(renderer, chart_dir=args.chart, policy_wasm=args.policy)
    except CheckpointError as error:
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 2
    except (OSError, RenderError, ValueError) as error:
        print(f"error: gate: {error}", file=sys.stderr)
        return 2
    results: list[tuple[str, GateResult]] = []
    stdout = sys.stdout
    # With the manifests on stdout, the report goes to stderr.
    to_stderr = args.output == "-"
    with contextlib.redirect_stdout(sys.stderr) if to_stderr else contextlib.nullcontext():
        for name, values in documents:
            result = gate.run(values, release=args.release, namespace=args.namespace)
            results.append((name, result))
            print_result(name, result, args)
        if args.junit_xml:
            write_junit_xml(args.junit_xml, results)
            print(f"gate: JUnit XML written to {args.junit_xml}")
        if args.output:
            write_manifests(args.output, results, stdout)
        failed = [name for name, result in results if result.denied]
        print(f"gate: {len(results) - len(failed)} of {len(results)} values documents pass")
    return 1 if failed else 0


def write_manifests(output: str, results: list[tuple[str, GateResult]], stdout: TextIO) -> None:
    """The rendered manifests of every values document (headed by its name when several); a
    file that cannot be written is a ConfigError naming it (exit 2)."""
    several = len(results) > 1
    text = "".join(
        manifests_yaml(result.manifests, f"values: {name}" if several else "")
        for name, result in results
    )
    if output == "-":
        stdout.write(text)
        stdout.flush()
        return
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as error:
        raise ConfigError("--output", f"cannot write {output}: {error.strerror}") from None
    print(f"gate: rendered manifests written to {output}")


def print_result(name: str, result: GateResult, args: argparse.Namespace) -> None:
    denies = [f for f in result.findings if f.level is Level.DENY]
    warns = [f for f in result.findings if f.level is Level.WARN]
    print(
        f"== {name} (release {args.release}, namespace {args.namespace}, engine {args.engine}):"
        f" {len(result.manifests)} objects"
    )
    for finding in denies + ([] if args.quiet else warns):
        print(format_finding(finding))
    verdict = "DENIED" if denies else "PASS"
    print(f"   {verdict}: {len(denies)} deny, {len(warns)} warn")


def format_finding(finding: Finding) -> str:
    where = f"  [{finding.source}]" if finding.source else ""
    message = finding.message
    if not message.startswith(f"{finding.rule} "):
        obj = f" {finding.obj}" if finding.obj else ""
        message = f"{finding.rule}{obj}: {message}"
    return f"   {finding.level.value.upper():4} {finding.check:17} {message}{where}"
