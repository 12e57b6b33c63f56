"""The files the package ships beside its code, found through importlib.resources.

The wheel carries the JSON schemas and, for the gate, the Helm chart, the Rego policies and the
example values documents under `checkpoint_runtime/data/`. In a source checkout the same names
are links to the top-level `schemas/`, `charts/checkpoint-runtime/`, `policy/` and `ci/`
folders, so an editable install reads the files being edited. Nothing depends on the working
directory or on where the package sits relative to a checkout.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import Final

from checkpoint_runtime.errors import PackageDataError

SCHEMAS: Final = "schemas"
CHART: Final = "chart"
POLICY: Final = "policy"
EXAMPLE_VALUES: Final = "ci"


def data_dir(name: str) -> Path:
    """The shipped folder `name` (one of the constants above) as a real directory."""
    resource = files("checkpoint_runtime") / "data" / name
    if not isinstance(resource, Path) or not resource.is_dir():
        raise PackageDataError(
            f"the package data folder {name!r} is missing from {resource}; "
            "reinstall checkpoint-runtime from a wheel built by its own build"
        )
    return resource.resolve()


def schema_file(file_name: str) -> Path:
    """One of the shipped JSON schemas, e.g. runtime-config.schema.json."""
    path = data_dir(SCHEMAS) / file_name
    if not path.is_file():
        raise PackageDataError(f"the schema {file_name!r} is missing from {path.parent}")
    return path
