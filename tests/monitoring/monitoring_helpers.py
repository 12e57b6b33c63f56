"""Helpers shared by the monitoring tests (a unique module name: tests/ has no packages)."""

from __future__ import annotations

# Series of the write-budget alert and dashboard panel that the store exports from shard format
# v3 on; until that lands they are checked only when the scrape has them (the promtool unit tests
# cover the rule).
PENDING_SERIES = frozenset(
    {"checkpoint_shard_api_bytes_written_total", "checkpoint_store_write_budget_bytes_per_second"}
)


def unexported(names: set[str], scraped: set[str]) -> set[str]:
    """Names the runtime does not serve (the pending write-budget series excepted while absent)."""
    return {name for name in names - scraped if name not in PENDING_SERIES}
