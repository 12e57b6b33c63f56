"""The shard format: row keys, the codec, shard names and labels, the legacy document."""
