"""The sharded store: one fenced, compressed object per collector namespace."""
