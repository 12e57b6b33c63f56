"""The gate image as a CI job runs it: `checkpoint-runtime gate` is its entrypoint, the values
file comes from the job's checkout mounted at /work, the report goes to stdout.

Run with podman + runc under the same restrictions as the runtime's image (UID 10001, read-only
root filesystem, only /tmp writable, no capabilities, no network): the gate needs neither a
network nor a writable root, and its policies (OPA compiled to Wasm) run in the container.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from image_harness import ROOT, Podman, archive_config, archive_entries, chown_for_runtime

from checkpoint_gate.validate import KUBERNETES_VERSION

PASSING = (ROOT / "ci" / "file-store-values.yaml").read_text()
# Valid values whose runtime would be killed for memory: the gate's runtime check denies it.
# The gate image's file bytes, measured at 350 MB; a bound that catches a copy coming back.
MAX_GATE_FILE_BYTES = 360_000_000
DENIED = "resources:\n  requests:\n    memory: 20Mi\n  limits:\n    memory: 20Mi\n"


def gate(
    podman: Podman, image: str, checkout: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    chown_for_runtime(checkout)
    return podman.run_once(image, *args, options=("--volume", f"{checkout}:/work:ro"))


def checks(report: str) -> dict[str, Any]:
    """conftest's JSON report, by check (its `namespace`)."""
    return {result["namespace"]: result for result in json.loads(report)}


def test_the_gate_image_passes_valid_values_with_its_policies_run(
    podman: Podman, gate_image: str, tmp_path: Path
) -> None:
    (tmp_path / "values.yaml").write_text(PASSING)
    result = gate(podman, gate_image, tmp_path, "-f", "values.yaml", "--format", "json")
    assert result.returncode == 0, result.stderr
    found = checks(result.stdout)
    assert set(found) >= {"values-schema", "render", "kubernetes-schema", "policy"}
    assert all(check["filename"] == "values.yaml" for check in found.values())
    assert all(not check.get("failures") for check in found.values()), result.stdout
    assert found["policy"]["successes"] > 0  # the Wasm policies ran in the container


def test_the_gate_image_denies_values_the_runtime_would_refuse(
    podman: Podman, gate_image: str, tmp_path: Path
) -> None:
    (tmp_path / "values.yaml").write_text(DENIED)
    result = gate(podman, gate_image, tmp_path, "-f", "values.yaml", "--format", "json")
    assert result.returncode == 1, result.stderr
    found = checks(result.stdout).values()
    failures = [f["msg"] for check in found for f in check.get("failures", [])]
    assert len(failures) == 1
    assert failures[0].startswith("MEM-1 resources.limits.memory:")


def test_the_gate_image_is_configured_for_ci_and_its_size(gate_archive: Path) -> None:
    config = archive_config(gate_archive)
    assert config["config"]["Entrypoint"] == ["checkpoint-runtime", "gate"]
    assert config["config"]["WorkingDir"] == "/work"
    assert config["config"]["User"] == "10001:10001"
    labels = config["config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "checkpoint-runtime-gate"
    assert config["RepoTags"] == [
        f"docker.io/library/checkpoint-runtime-gate:{labels['org.opencontainers.image.version']}"
    ]
    info = json.loads((gate_archive.parent / "info.json").read_text())
    print(f"gate image: {info['unpacked_bytes'] / 1e6:.0f} MB unpacked, "
          f"{info['archive_bytes'] / 1e6:.0f} MB archive")  # fmt: skip


def test_the_gate_image_keeps_one_copy_of_the_helm_library_and_one_schema_version(
    gate_archive: Path,
) -> None:
    """The Helm SDK's library once (its three sonames hard links to one file), the Kubernetes
    schemas of the one version the gate validates against, and a bound on the size."""
    entries = [entry for entry, _ in archive_entries(gate_archive)]
    helm = {e.name.rsplit("/", 1)[-1]: e for e in entries if "/helm_python/lib/libhelm_c" in e.name}
    assert sorted(helm) == ["libhelm_c.so", "libhelm_c.so.0", "libhelm_c.so.0.2.2"]
    assert sum(entry.isfile() for entry in helm.values()) == 1
    assert sum(entry.islnk() for entry in helm.values()) == 2
    schemas = {
        e.name.split("/kubernetes-json-schema/")[1].split("/")[0]
        for e in entries
        if "/kubernetes-json-schema/" in e.name and e.isfile()
    }
    assert schemas == {f"v{KUBERNETES_VERSION}.0-local-strict"}
    total = sum(entry.size for entry in entries if entry.isfile())
    print(f"gate image file bytes: {total / 1e6:.1f} MB")
    assert total <= MAX_GATE_FILE_BYTES
