"""Find the pinned opa and conftest binaries, and build what is generated from the policies.

The binaries come from scripts/testenv/build-policy-tools.sh (built from the official Go modules
at the versions pinned in scripts/testenv/policy-tools/go.mod, cached per pin set), or from the
folder named by CHECKPOINT_POLICY_TOOLS_BIN. A missing binary is an error, never a reason to skip.
Gate users need neither: the Wasm module the gate evaluates is generated here by `just gen` and
committed.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from functools import cache
from pathlib import Path

from checkpoint_testenv.binaries import REPO_ROOT, locate_built

BIN_ENV = "CHECKPOINT_POLICY_TOOLS_BIN"
REQUIRED = ("opa", "conftest")
BUILD_SCRIPT = REPO_ROOT / "scripts" / "testenv" / "build-policy-tools.sh"


@cache
def locate() -> Path:
    """The folder holding opa and conftest, building them if needed."""
    return locate_built(BIN_ENV, BUILD_SCRIPT, REQUIRED)


def opa() -> Path:
    return locate() / "opa"


def conftest() -> Path:
    return locate() / "conftest"


def build_wasm(policy_dir: Path, entrypoint_rego: Path, entrypoints: list[str]) -> bytes:
    """`opa build -t wasm` of the policies (tests left out) and the entrypoint module.

    The module records each source file's path (in error locations), so the build runs on copies
    named `policy/<file>` and `entrypoint.rego`: the same bytes from any checkout folder.
    """
    modules = sorted(p for p in policy_dir.glob("*.rego") if not p.name.endswith("_test.rego"))
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        (work / "policy").mkdir()
        sources = []
        for module in modules:
            shutil.copyfile(module, work / "policy" / module.name)
            sources.append(f"policy/{module.name}")
        shutil.copyfile(entrypoint_rego, work / "entrypoint.rego")
        sources.append("entrypoint.rego")
        command = [str(opa()), "build", "-t", "wasm", "-o", "bundle.tar.gz"]
        for entrypoint in entrypoints:
            command += ["-e", entrypoint]
        completed = subprocess.run(
            [*command, *sources], capture_output=True, text=True, check=False, cwd=work
        )
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{completed.stderr}")
        with tarfile.open(work / "bundle.tar.gz", mode="r:gz") as archive:
            member = archive.extractfile("/policy.wasm")
            if member is None:
                raise RuntimeError("opa build wrote no /policy.wasm")
            return member.read()


def opa_fmt(source: str) -> str:
    """Rego source as `opa fmt` writes it."""
    completed = subprocess.run(
        [str(opa()), "fmt"], input=source, capture_output=True, text=True, check=False
    )
    if completed.returncode != 0:
        raise RuntimeError(f"opa fmt failed:\n{completed.stderr}")
    return completed.stdout


# --- generated files (`just gen`) ------------------------------------------------------------

POLICY = Path("policy")
ENTRYPOINT_REGO = Path("src/checkpoint_gate/entrypoint.rego")
POLICY_WASM = Path("src/checkpoint_gate/policy.wasm")
FIXTURES = POLICY / "fixtures_test.rego"
CHART = Path("charts/checkpoint-runtime")
# The Wasm entrypoints: the gate's one-call verdicts, and deny/warn alone for locating an error.
WASM_ENTRYPOINTS = ["gate/verdicts", "main/deny", "main/warn"]
# The default render as the Rego unit tests see it: release cr in namespace ns1, each object
# under a fixed name (the tests patch them by these names and by their index in the release).
FIXTURE_RELEASE, FIXTURE_NAMESPACE = "cr", "ns1"
FIXTURE_NAMES = {
    "ServiceAccount": "fixture_service_account",
    "ConfigMap": "fixture_config",
    "Role": "fixture_role",
    "RoleBinding": "fixture_role_binding",
    "Service": "fixture_service",
    "Deployment": "fixture_deployment",
    "Pod": "fixture_test_pod",
}


ADMISSION_FIXTURE_VALUES = {
    "admissionPolicy": {"enabled": True},
    "rbac": {"scope": "names"},
    "checkpoint": {
        "store": {"legacyConfigMap": "old-checkpoints"},
        "collectors": [{"kind": "flowlogs", "url": "http://flows.example:8080/v1"}],
    },
}


def _write_if_changed(path: Path, content: bytes) -> bool:
    if path.exists() and path.read_bytes() == content:
        return False
    path.write_bytes(content)
    return True


def render_fixtures(root: Path) -> str:
    """policy/fixtures_test.rego: the chart's real default render, one rule per object."""
    import json

    from checkpoint_gate.render import SdkRenderer

    manifests = SdkRenderer(root / CHART).render(
        {}, release=FIXTURE_RELEASE, namespace=FIXTURE_NAMESPACE
    )
    by_kind = {manifest.kind: manifest.document for manifest in manifests}
    if sorted(by_kind) != sorted(FIXTURE_NAMES) or len(manifests) != len(FIXTURE_NAMES):
        raise RuntimeError(
            f"the default render has {[m.kind for m in manifests]}; update FIXTURE_NAMES"
        )
    lines = [
        "# Generated by `just gen` from the chart's default render (release cr, namespace ns1);",
        "# do not edit. Tests patch one object at a time with json.patch and check the verdict.",
        "package main",
        "",
        "import rego.v1",
        "",
    ]
    for kind, name in FIXTURE_NAMES.items():
        lines += [f"{name} := {json.dumps(by_kind[kind], indent=1, sort_keys=True)}", ""]
    lines.append(f"fixture_release := [{', '.join(FIXTURE_NAMES.values())}]")
    admission = SdkRenderer(root / CHART).render(
        ADMISSION_FIXTURE_VALUES, release=FIXTURE_RELEASE, namespace=FIXTURE_NAMESPACE
    )
    documents = json.dumps([manifest.document for manifest in admission], indent=1, sort_keys=True)
    lines += [
        "",
        "# The same release with the admission policies on (names scope, a collector, a legacy",
        "# ConfigMap): every object, in render order.",
        f"fixture_admission_release := {documents}",
    ]
    return opa_fmt("\n".join(lines) + "\n")


def write_policy_files(root: Path) -> None:
    """Regenerate the Rego fixtures and the gate's Wasm module (each written only on change)."""
    _write_if_changed(root / FIXTURES, render_fixtures(root).encode())
    wasm = build_wasm(root / POLICY, root / ENTRYPOINT_REGO, WASM_ENTRYPOINTS)
    _write_if_changed(root / POLICY_WASM, wasm)
