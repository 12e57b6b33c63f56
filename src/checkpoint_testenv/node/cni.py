"""The pods' network: a bridge inside the node's namespace with host-local addresses.

The bridge is the pods' gateway (so they reach the node address, where CoreDNS and the API
server listen) and hairpins (a pod may reach itself through a Service). Address leases live in
the run's folder, not /var/lib/cni.
"""

from __future__ import annotations

import json
from pathlib import Path

POD_CIDR = "10.244.0.0/24"
BRIDGE = "cni0"


def write_config(conf_dir: Path, data_dir: Path, network: str) -> Path:
    """Write the CNI config list for network `network`; its path."""
    config = {
        "cniVersion": "0.4.0",
        "name": network,
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": True,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(data_dir),
                },
            },
        ],
    }
    path = conf_dir / "10-checkpoint-testenv.conflist"
    path.write_text(json.dumps(config, indent=2))
    return path
