"""Fixtures of the hostile-input tier: the installed-artifact tier's wheel and gate virtualenv
(its session fixtures, reused: the wheel built by scripts/dist.sh, installed with [gate] in a
fresh virtualenv), so every case runs what a user installs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

INSTALLED = Path(__file__).resolve().parents[1] / "installed"
sys.path.insert(0, str(INSTALLED))  # installed_helpers, which the installed conftest imports


def _installed_conftest() -> object:
    spec = importlib.util.spec_from_file_location("installed_conftest", INSTALLED / "conftest.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_installed = _installed_conftest()
wheel = _installed.wheel  # type: ignore[attr-defined]
gate_venv = _installed.gate_venv  # type: ignore[attr-defined]
