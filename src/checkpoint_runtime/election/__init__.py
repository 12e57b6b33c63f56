"""Leader election on a coordination.k8s.io Lease."""
