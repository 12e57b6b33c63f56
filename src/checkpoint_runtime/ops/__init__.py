"""Operator commands: inspect, migrate and project, outside the running process."""
