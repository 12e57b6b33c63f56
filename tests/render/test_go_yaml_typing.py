"""The gate reads a rendered manifest's scalars as Go YAML does (conftest, helm, the API server).

Each scalar is written plain into one file, parsed by the pinned conftest (`conftest parse`,
sigs.k8s.io/yaml) and by the gate's loader; the two readings must be equal, type and value.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from checkpoint_gate.goyaml import GoYamlLoader
from checkpoint_gate.manifests import RenderError, documents
from checkpoint_testenv import policytools

PLAIN_SCALARS = [
    # PyYAML's YAML 1.1 reading differs from Go's on each of these.
    "<<", "=", "08", "09.5", "0o17", "0O17", "017", "0777", "1_000", "1_0.5", "0b101", "0x1f",
    "0X1F", "+0x1f", "-0x1f", "0x_1f", "1e3", "1E3", "1e+3", "1.e3", "12e03", "y", "Y", "n", "N",
    "1:20", "190:20:30", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43",
    "4294967296", "-2147483649",
    # Float-shaped, but past float64: go-yaml keeps the text (a volume name like `61e1008`).
    "61e1008", "-2e999", ".5e999", "1_0e400",
    # And these must stay as they are.
    ".5", "+.5", "+1", "-0", "0.", "1.0", "7", "-3", "~", "null", "Null", "NULL", "yes", "no",
    "on", "off", "On", "OFF", "true", "True", "TRUE", "false", "tRue", "0o", "0x", "-x", "+", ".",
    "1.2.3", "W", "x:y", "0.0.0.0", "1e", "e3", "<", "<<<", "==",
]  # fmt: skip


def conftest_parse(path: Path) -> Any:
    command = [str(policytools.conftest()), "parse", str(path)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_each_plain_scalar_is_read_as_conftest_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "scalars.yaml"
    lines = [f"k{index}: {scalar}\n" for index, scalar in enumerate(PLAIN_SCALARS)]
    path.write_text("".join(lines), encoding="utf-8")
    go = conftest_parse(path)
    gate = yaml.load(path.read_text(encoding="utf-8"), Loader=GoYamlLoader)
    for index, scalar in enumerate(PLAIN_SCALARS):
        key = f"k{index}"
        # JSON typing: json.dumps tells 8 from 8.0 and "8" from 8 alike on both sides.
        assert json.dumps(gate[key]) == json.dumps(go[key]), f"{scalar!r}: {gate[key]!r}"


def test_keys_become_strings_and_merge_keys_still_merge(tmp_path: Path) -> None:
    path = tmp_path / "keys.yaml"
    path.write_text(
        "08: a\nyes: b\n1.5: c\n1e3: d\n0x1f: e\ns: {a: &x {b: 1}, c: {<<: *x, d: <<}}\n",
        encoding="utf-8",
    )
    gate = yaml.load(path.read_text(encoding="utf-8"), Loader=GoYamlLoader)
    assert json.dumps(gate, sort_keys=True) == json.dumps(conftest_parse(path), sort_keys=True)


@pytest.mark.parametrize("scalar", [".nan", ".inf", "-.Inf"])
def test_a_scalar_json_cannot_hold_is_refused_like_go_yaml_refuses_it(
    scalar: str, tmp_path: Path
) -> None:
    path = tmp_path / "nan.yaml"
    path.write_text(f"k: {scalar}\n", encoding="utf-8")
    command = [str(policytools.conftest()), "parse", str(path)]
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    assert completed.returncode != 0
    assert "unsupported value" in completed.stderr
    with pytest.raises(RenderError, match="cannot be represented in JSON"):
        documents("t.yaml", f"kind: X\nk: {scalar}\n")


def test_quoted_and_tagged_scalars_keep_their_string() -> None:
    (manifest,) = documents("t.yaml", "kind: X\na: '08'\nb: \"<<\"\nc: !!str 1e3\n")
    assert manifest.document == {"kind": "X", "a": "08", "b": "<<", "c": "1e3"}
