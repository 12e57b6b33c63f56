"""Test node: the control plane plus kubelet, containerd, CNI, kube-proxy and CoreDNS.

Everything runs in a network namespace the run creates and removes (see cluster.py).
"""
