"""The runtime process: config, leader election, store, collectors, health and metrics."""
