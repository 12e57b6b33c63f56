"""The chart, the policies and the example values documents the gate uses by default: the
copies the package ships (see checkpoint_runtime.resources)."""

from __future__ import annotations

from checkpoint_runtime.resources import CHART, EXAMPLE_VALUES, POLICY, data_dir

CHART_DIR = data_dir(CHART)
POLICY_DIR = data_dir(POLICY)
CI_VALUES_DIR = data_dir(EXAMPLE_VALUES)
