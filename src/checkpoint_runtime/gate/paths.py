"""Where the gate finds the chart and the policies in a checkout (src layout, editable install)."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[3]
CHART_DIR = PROJECT_ROOT / "charts" / "checkpoint-runtime"
POLICY_DIR = PROJECT_ROOT / "policy"
CI_VALUES_DIR = PROJECT_ROOT / "ci"
