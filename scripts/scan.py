"""Run the manifest scanners (checkov, kube-score) over the chart rendered with your values.

Renders the chart with `helm template` (the defaults composed with -f/--set like helm does, or
with --matrix the defaults and every ci/*-values.yaml), runs checkov and kube-score at the pinned
versions (scripts/testenv/build-scanners.sh installs them on first use), and prints every
exception the manifests carry with its reason, then every finding. Exit status: 0 when nothing
is unexplained, 1 when something is, 2 on a usage error (a values file that cannot be read, a
bad --set, values the chart refuses).

Usage: python scripts/scan.py [-f FILE]... [--set KEY=VALUE]... | --matrix
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from checkpoint_gate.manifests import RenderError
from checkpoint_gate.paths import CHART_DIR, CI_VALUES_DIR
from checkpoint_gate.render import CliRenderer
from checkpoint_gate.values import load_values
from checkpoint_runtime.errors import ValuesFileError
from checkpoint_testenv import binaries, scanners


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-f", "--values", action="append", type=Path, default=[], metavar="FILE")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--matrix", action="store_true", help="the defaults and every ci/*-values.yaml"
    )
    args = parser.parse_args(argv)
    if args.matrix and (args.values or args.set):
        parser.error("--matrix takes no -f or --set")
    return args


def releases(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """Release name -> values: one release per values document."""
    if not args.matrix:
        return {"values": load_values(args.values, args.set)}
    documents = {"defaults": {}}
    for path in sorted(CI_VALUES_DIR.glob("*-values.yaml")):
        documents[path.name.removesuffix("-values.yaml")] = load_values([path])
    return documents


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        documents = releases(args)
    except ValuesFileError as error:
        print(f"error: ValuesFileError: {error}", file=sys.stderr)
        return 2
    renderer = CliRenderer(CHART_DIR, binaries.locate() / "helm")
    with tempfile.TemporaryDirectory(prefix="scan-") as scratch:
        folder = Path(scratch)
        for release, values in documents.items():
            try:
                scanners.render_release(folder, renderer, release, values)
            except RenderError as error:
                print(f"error: RenderError: {release}: {error}", file=sys.stderr)
                return 2
        print(f"scan: checkov and kube-score over {len(documents)} render(s)", file=sys.stderr)
        reports = scanners.scan_folder(folder)
    unexplained = 0
    for name, report in reports.items():
        problems = report.unexplained()
        unexplained += len(problems)
        print(f"{name}: {len(report.suppressions)} exception(s), {len(problems)} unexplained")
        for s in report.suppressions:
            print(f"  exception {s.scanner} {s.check} {s.obj}: {s.reason or '(no reason)'}")
        for problem in problems:
            print(f"  UNEXPLAINED {problem}")
    return 1 if unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
