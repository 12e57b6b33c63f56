"""`checkpoint-runtime gate`: the render gate on your own values, for people and for CI.

    checkpoint-runtime gate -f my-values.yaml --set replicaCount=3 --junit-xml gate.xml
    checkpoint-runtime gate -f my-values.yaml --format sarif > gate.sarif

Values compose like `helm -f ... --set ...` (--set-json, --set, --set-string, --set-file are
parsed by Helm's own code and applied in Helm's order). The chart is rendered (in-process Helm
SDK, or the helm CLI with --engine cli), the values are checked against values.schema.json, the
manifests against the Kubernetes schemas, the rendered runtime config through the runtime's own
startup check (what `checkpoint-runtime run` would refuse, named by its values key), and the
policies are evaluated. Every finding is printed with its rule and object; the exit status is 1
when anything is denied, 2 for a named error (`error: <Name>: ...`: values that cannot be read
or exceed the input bounds, a bad argument, a chart or helm binary that cannot be used).
`--output -` prints the manifests the gate rendered (no separate helm needed). `--format NAME`
prints the report on stdout in a format CI systems read (conftest's json, tap, table, junit,
github; sarif for code scanning), the readable report going to stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
from pathlib import Path
from typing import Any, TextIO

from checkpoint_gate.engine import POLICY_WASM, Level
from checkpoint_gate.formats import FORMATS, FORMATTERS, TEXT, Document
from checkpoint_gate.junit import write_junit_xml
from checkpoint_gate.manifests import Json
from checkpoint_gate.output import manifests_yaml
from checkpoint_gate.paths import CHART_DIR, CI_VALUES_DIR
from checkpoint_gate.pipeline import Finding, Gate, GateResult
from checkpoint_gate.render import DEFAULT_NAMESPACE, DEFAULT_RELEASE, CliRenderer
from checkpoint_gate.setvalues import SetExpression
from checkpoint_gate.values import load_values
from checkpoint_runtime.constants import MAX_RELEASE_NAME
from checkpoint_runtime.errors import ChartError, ConfigError, ExitCode, UsageError, quote

# A chart folder holds a few dozen files; more is not a chart (e.g. --chart /tmp).
MAX_CHART_FILES = 500
SET_KINDS = ("set", "set-string", "set-json", "set-file")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "gate",
        help="render the chart with your values and run the policy gate",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        metavar="FILE",
        help="values files gated one by one, each over the -f files and --set (as a pre-commit "
        "hook passes the changed files); without any, the -f files and --set are one document",
    )
    parser.add_argument("-f", "--values", action="append", type=Path, default=[], metavar="FILE")
    for kind in SET_KINDS:
        parser.add_argument(
            f"--{kind}",
            dest=kind.replace("-", "_"),
            action="append",
            default=[],
            metavar="KEY=VALUE" if kind != "set-file" else "KEY=FILE",
        )
    parser.add_argument(
        "--matrix",
        action="store_true",
        help="instead of one values document, gate the defaults and every ci/*-values.yaml "
        "(refused together with -f or --set)",
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
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=TEXT,
        help="the report on stdout: text (default), or for CI json, tap, table, junit, github "
        "(workflow annotations) or sarif (code scanning); the text report then goes to stderr",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="print denies and totals only")
    parser.set_defaults(func=run)


def set_expressions(args: argparse.Namespace) -> list[SetExpression]:
    return [
        SetExpression(kind, text)
        for kind in SET_KINDS
        for text in getattr(args, kind.replace("-", "_"))
    ]


def value_documents(args: argparse.Namespace) -> list[tuple[str, Path, Json]]:
    """(name, the file its findings point at, values) of every values document to gate: the
    defaults and the shipped examples with --matrix; each FILE argument over the -f files and
    --set; else the -f files and --set together (the last -f file is the one that overrides)."""
    sets = set_expressions(args)
    defaults = args.chart / "values.yaml"
    if args.matrix:
        documents: list[tuple[str, Path, Json]] = [("defaults", defaults, {})]
        for path in sorted(CI_VALUES_DIR.glob("*-values.yaml")):
            documents.append((path.name, path, load_values([path])))
        return documents
    bases = [path.name for path in args.values]
    set_names = [expression.source for expression in sets]
    if args.files:
        return [
            (
                " + ".join([*bases, str(file), *set_names]),
                file,
                load_values([*args.values, file], sets),
            )
            for file in args.files
        ]
    file = args.values[-1] if args.values else defaults
    return [(" + ".join(bases + set_names) or "defaults", file, load_values(args.values, sets))]


def display_path(path: Path) -> str:
    """`path` relative to the working directory when under it (as a CI annotation wants it)."""
    absolute = Path(os.path.abspath(path))
    cwd = Path.cwd()
    return (absolute.relative_to(cwd) if absolute.is_relative_to(cwd) else absolute).as_posix()


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse, before anything is read or rendered, what helm or the gate would only fail on
    later (or silently ignore)."""
    if args.matrix and (args.values or args.files or set_expressions(args)):
        raise UsageError(
            "--matrix", "gates the shipped values documents; it takes no FILE, -f or --set"
        )
    if args.format != TEXT and args.output == "-":
        raise UsageError(
            "--format", f"{args.format} and --output - both print on stdout: use --output FILE"
        )
    _check_release(args.release)
    if not DNS_LABEL.fullmatch(args.namespace):
        raise UsageError("--namespace", f"{quote(args.namespace, 60)} is not a DNS-1123 label")
    if args.junit_xml is not None:
        target = args.junit_xml
        if target.is_dir():
            raise UsageError("--junit-xml", f"{target} is a folder; give a file name")
        existing = target.parent
        while not existing.exists() and existing != existing.parent:
            existing = existing.parent
        if not existing.is_dir():
            raise UsageError("--junit-xml", f"{existing} is a file, not a folder")
    check_chart(args.chart)
    if args.engine == "cli" and args.helm is not None:
        helm = args.helm
        if not helm.is_file() or not os.access(helm, os.X_OK):
            raise UsageError("--helm", f"{helm} is not an executable file")


def _check_release(release: str) -> None:
    if len(release) > MAX_RELEASE_NAME:
        raise UsageError(
            "--release",
            f"{quote(release, 60)} is {len(release)} characters; helm allows at most "
            f"{MAX_RELEASE_NAME}",
        )
    from helm_python import validate_release_name

    try:
        validate_release_name(release)
    except Exception as error:  # helm_python raises its own error classes
        raise UsageError("--release", " ".join(str(error).split())[:200]) from None


def check_chart(chart: Path) -> None:
    """A folder that looks like a chart, small enough to load."""
    if not chart.is_dir():
        raise ChartError(f"{chart}: not a folder")
    if not (chart / "Chart.yaml").is_file():
        raise ChartError(f"{chart}: no Chart.yaml, not a Helm chart")
    count = 0
    for _root, dirs, files in os.walk(chart):
        count += len(files) + len(dirs)
        if count > MAX_CHART_FILES:
            raise ChartError(f"{chart}: more than {MAX_CHART_FILES} files, not a chart")


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    documents = value_documents(args)
    try:
        renderer = CliRenderer(args.chart, args.helm) if args.engine == "cli" else None
        gate = Gate(renderer, chart_dir=args.chart, policy_wasm=args.policy)
    except Exception as error:  # helm_python raises one class per failure kind
        reason = " ".join(str(error).split())[:300]
        raise ChartError(f"{args.chart}: cannot load the chart or the policies: {reason}") from None
    results: list[tuple[str, GateResult]] = []
    stdout = sys.stdout
    # With the manifests or a CI format on stdout, the text report goes to stderr.
    to_stderr = args.output == "-" or args.format != TEXT
    with contextlib.redirect_stdout(sys.stderr) if to_stderr else contextlib.nullcontext():
        for name, _, values in documents:
            result = gate.run(values, release=args.release, namespace=args.namespace)
            results.append((name, result))
            print_result(name, result, args)
        if args.junit_xml:
            try:
                write_junit_xml(args.junit_xml, results)
            except OSError as error:
                raise UsageError("--junit-xml", f"cannot write {args.junit_xml}: {error}") from None
            print(f"gate: JUnit XML written to {args.junit_xml}")
        if args.output:
            write_manifests(args.output, results, stdout)
        failed = [name for name, result in results if result.denied]
        print(f"gate: {len(results) - len(failed)} of {len(results)} values documents pass")
    if args.format != TEXT:
        report = [
            Document(name, display_path(file), result)
            for (name, result), (_, file, _) in zip(results, documents, strict=True)
        ]
        stdout.write(FORMATTERS[args.format](report))
        stdout.flush()
    return ExitCode.FINDING if failed else ExitCode.OK


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
