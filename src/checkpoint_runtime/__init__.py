"""checkpoint-runtime: sharded gzip ConfigMap checkpoints for leader-elected collectors."""

__version__ = "0.1.0"
