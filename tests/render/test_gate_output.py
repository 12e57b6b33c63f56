"""`gate --output`: the manifests the gate rendered, printed so that a user needs no helm."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from checkpoint_gate.goyaml import GoYamlLoader
from checkpoint_gate.manifests import Manifest, parse_helm_template
from checkpoint_gate.output import manifests_yaml
from checkpoint_gate.pipeline import Gate
from checkpoint_runtime.cli import main


def test_output_dash_prints_the_gated_manifests_on_stdout_and_the_report_on_stderr(
    gate: Gate, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gate", "--output", "-", "--set", "replicaCount=2"]) == 0
    captured = capsys.readouterr()
    assert "PASS: 0 deny" in captured.err
    assert "PASS" not in captured.out
    printed = parse_helm_template(captured.out)
    expected = gate.run({"replicaCount": 2}).manifests
    assert [(m.source, m.document) for m in printed] == [(m.source, m.document) for m in expected]


def test_output_file_holds_every_matrix_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "rendered.yaml"
    assert main(["gate", "--matrix", "-q", "--output", str(target)]) == 0
    assert f"rendered manifests written to {target}" in capsys.readouterr().out
    text = target.read_text(encoding="utf-8")
    assert text.startswith("# values: defaults\n")
    assert text.count("# values: ") > 1


def test_an_unwritable_output_is_a_named_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["gate", "-q", "--output", str(tmp_path / "missing" / "out.yaml")]) == 2
    assert "error: ConfigError: --output: cannot write" in capsys.readouterr().err


@pytest.mark.parametrize(
    "text", ["on", "yes", "null", "~", "0o17", "0x1F", "1_000", "1e3", ".5", "+1", "", "8", "true"]
)
def test_a_string_go_yaml_would_retype_is_quoted(text: str) -> None:
    manifest = Manifest("t.yaml", {"kind": "ConfigMap", "data": {"k": text, text or "e": "v"}})
    stream = manifests_yaml([manifest])
    (document,) = yaml.load_all(stream, Loader=GoYamlLoader)
    assert document == manifest.document


def test_a_multi_line_string_is_a_literal_block_and_reads_back() -> None:
    config = '{\n  "a": 1\n}\n'
    manifest = Manifest("t.yaml", {"kind": "ConfigMap", "data": {"config.json": config}})
    stream = manifests_yaml([manifest])
    assert "config.json: |" in stream
    (document,) = yaml.load_all(stream, Loader=GoYamlLoader)
    assert document == manifest.document
