"""The release's tools: cosign (signing) and syft with ntia-conformance-checker (the SBOM).

They come from scripts/testenv/build-cosign.sh and build-sbom-tools.sh (built from the Go
modules pinned in scripts/testenv/cosign/ and sbom-tools/, cached per pin), or from the folders
named by CHECKPOINT_COSIGN_BIN and CHECKPOINT_SBOM_TOOLS_BIN. The registry client (crane) is the
test registry's (checkpoint_testenv.registry). A missing binary is an error, never a reason to
skip.

cosign runs offline here: key-based signatures, nothing uploaded to a transparency log, and an
empty trust root (EMPTY_TRUSTED_ROOT) so that verification looks up no public-good instance.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from checkpoint_testenv.binaries import REPO_ROOT, locate_built

COSIGN_BIN_ENV = "CHECKPOINT_COSIGN_BIN"
COSIGN_BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-cosign.sh"
SBOM_TOOLS_BIN_ENV = "CHECKPOINT_SBOM_TOOLS_BIN"
SBOM_TOOLS_BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-sbom-tools.sh"

EMPTY_TRUSTED_ROOT = {
    "mediaType": "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
    "tlogs": [],
    "certificateAuthorities": [],
    "ctlogs": [],
    "timestampAuthorities": [],
}
"""A sigstore trust root that trusts no log, CA or timestamp authority: given to cosign with
--trusted-root, it verifies against the public key alone and fetches no trust root."""


@cache
def locate_cosign() -> Path:
    """The `cosign` binary, building it if needed."""
    return locate_built(COSIGN_BIN_ENV, COSIGN_BUILD_SCRIPT, ("cosign",)) / "cosign"


@cache
def locate_sbom_tools() -> Path:
    """The folder holding `syft` and `ntia-checker`, building them if needed."""
    return locate_built(SBOM_TOOLS_BIN_ENV, SBOM_TOOLS_BUILD_SCRIPT, ("syft", "ntia-checker"))


def write_empty_trusted_root(path: Path) -> Path:
    path.write_text(json.dumps(EMPTY_TRUSTED_ROOT, indent=2) + "\n", encoding="utf-8")
    return path
