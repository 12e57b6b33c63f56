"""Where shards live: the embedded file folder or one ConfigMap per shard."""
