"""Shared test setup: the real API server fixtures come from the test environment plugin."""

pytest_plugins = ["checkpoint_testenv.pytest_plugin", "checkpoint_testenv.tiertimes"]
