"""`gate --set` composes values exactly as `helm template --set` does: the same expressions go
to the real helm CLI (a one-template chart that prints `.Values` as JSON) and to the gate's
load_values, and the two values documents must be equal. An expression the gate cannot compose
as Helm does must be refused with a named error, never composed differently."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from checkpoint_gate.setvalues import SetExpression, UnsupportedSetError
from checkpoint_gate.values import load_values
from checkpoint_runtime.errors import ValuesFileError

BASE = "list:\n- name: a\n  n: 1\n- name: b\nmap:\n  x: 1\n  y: [1, 2]\n"

CASES: dict[str, list[str]] = {
    "index-merge": ["--set", "a[0].x=1", "--set", "a[0].y=2"],
    "index-into-file-list": ["-f", "{base}", "--set", "list[0].n=100"],
    "index-append-to-file-list": ["-f", "{base}", "--set", "list[3].name=d"],
    "literal-replaces-file-list": ["-f", "{base}", "--set", "list={x,y}"],
    "types": ["--set", "m=1e3,n=5000,o=true,p=false,q=0,r=007,s=-3,t=1.5,u=0x10,v=,w=null"],
    "set-string": ["--set-string", "port=80,flag=true"],
    "set-json": ["--set-json", 'j={"k":[1,2],"m":null}', "--set-json", 'n=[1,{"a":2}]'],
    "set-file": ["--set-file", "f={base}"],
    "literal-then-index": ["--set", "l={1,2,3}", "--set", "l[1]=9"],
    "escaped-dot-and-comma": ["--set", r"e\.f=3,h=a\,b"],
    "sparse-index": ["--set", "g[2]=x"],
    "nested-index": ["--set", "g[1][0].k=v"],
    "map-then-scalar": ["--set", "a.b=1", "--set", "a=5"],
    "scalar-then-map": ["--set", "a=5", "--set", "a.b=1"],
    "helm-order-not-argv-order": ["--set-string", "a=2", "--set", "a=1", "--set-json", "b=1"],
    "file-map-merge": ["-f", "{base}", "--set", "map.z=3,map.y[0]=9"],
    "null-removes-from-file": ["-f", "{base}", "--set", "map.x=null"],
    "many-in-one": ["--set", "a.b.c=1,a.b.d=2,a.e[0]=3,a.e[1]=4"],
}


def _chart(root: Path) -> Path:
    chart = root / "values-chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: values-chart\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("{}\n")
    (chart / "templates" / "values.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: values\n"
        "data:\n  values.json: {{ toJson .Values | quote }}\n"
    )
    return chart


def helm_values(helm: Path, chart: Path, argv: list[str]) -> Any:
    done = subprocess.run(
        [str(helm), "template", "r", str(chart), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (document,) = [d for d in yaml.safe_load_all(done.stdout) if d]
    return json.loads(document["data"]["values.json"])


def gate_values(argv: list[str]) -> Any:
    files: list[Path] = []
    sets: list[SetExpression] = []
    for flag, value in zip(argv[::2], argv[1::2], strict=True):
        if flag == "-f":
            files.append(Path(value))
        else:
            sets.append(SetExpression(flag.removeprefix("--"), value))
    return load_values(files, sets)


@pytest.mark.parametrize("argv", list(CASES.values()), ids=list(CASES))
def test_set_composes_exactly_as_helm_template(helm: Path, tmp_path: Path, argv: list[str]) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(BASE)
    argv = [arg.replace("{base}", str(base)) for arg in argv]
    chart = _chart(tmp_path)
    refused: ValuesFileError | None = None
    try:
        ours = gate_values(argv)
    except ValuesFileError as error:
        refused = error
    if isinstance(refused, UnsupportedSetError):
        return  # refused by name: allowed, never a silent difference
    if refused is not None:  # then helm must refuse it too
        done = subprocess.run(
            [str(helm), "template", "r", str(chart), *argv], capture_output=True, check=False
        )
        assert done.returncode != 0, f"the gate refused what helm accepts: {refused}"
        return
    assert ours == helm_values(helm, chart, argv)


@pytest.mark.parametrize("expression", ["a", "a[x]=1", "a[-1]=1", "=1"])
def test_a_malformed_set_is_a_named_error(expression: str) -> None:
    with pytest.raises(ValuesFileError):
        load_values([], [expression])
