"""Test environment: a real kube-apiserver + etcd on loopback, built from pinned Go modules."""
