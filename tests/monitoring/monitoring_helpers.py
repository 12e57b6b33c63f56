"""Helpers shared by the monitoring tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations


def unexported(names: set[str], scraped: set[str]) -> set[str]:
    """The names among `names` that the runtime's /metrics does not serve."""
    return names - scraped
