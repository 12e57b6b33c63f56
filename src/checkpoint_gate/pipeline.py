"""One gate run over one values document: schema, render, Kubernetes schemas, the runtime's
startup check, policies.

Each stage produces findings; a later stage runs only when the earlier ones let it (nothing to
render when the values break the chart's schema: Helm would refuse them too, and one error is
reported once; nothing to validate when the chart did not render). Every finding names its
check and, where there is one, the object it is about, so a CI report points at the template
to fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from checkpoint_gate import runtime_check
from checkpoint_gate.advice import advise
from checkpoint_gate.engine import POLICY_WASM, Level, PolicyEngine, Verdict
from checkpoint_gate.manifests import Json, Manifest, RenderError
from checkpoint_gate.paths import CHART_DIR
from checkpoint_gate.render import DEFAULT_NAMESPACE, DEFAULT_RELEASE, SdkRenderer
from checkpoint_gate.validate import KubernetesValidator, ValuesSchema

CHECK_VALUES = "values-schema"
CHECK_RENDER = "render"
CHECK_KUBERNETES = "kubernetes-schema"
CHECK_RUNTIME = "runtime-config"
CHECK_POLICY = "policy"


class Renderer(Protocol):
    def render(self, values: Json, release: str = ..., namespace: str = ...) -> list[Manifest]: ...


@dataclass(frozen=True)
class Finding:
    """A failed (deny) or advisory (warn) check result."""

    check: str
    level: Level
    rule: str
    obj: str
    message: str
    source: str = ""


@dataclass
class GateResult:
    manifests: list[Manifest] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def denied(self) -> bool:
        return any(finding.level is Level.DENY for finding in self.findings)

    def of_check(self, check: str) -> list[Finding]:
        return [finding for finding in self.findings if finding.check == check]


class Gate:
    """The gate's fixed parts (chart schema, compiled policies) loaded once, reused per run."""

    def __init__(
        self,
        renderer: Renderer | None = None,
        chart_dir: Path = CHART_DIR,
        policy_wasm: Path = POLICY_WASM,
        kubernetes: KubernetesValidator | None = None,
    ) -> None:
        self.chart_dir = chart_dir
        # Also merges defaults for the jsonschema check. Values are validated here before the
        # render, and invalid ones are not rendered, so Helm need not validate them again.
        self._sdk = SdkRenderer(chart_dir, validate_values=False)
        self.renderer: Renderer = renderer or self._sdk
        self.schema = ValuesSchema(chart_dir / "values.schema.json")
        self.kubernetes = kubernetes or KubernetesValidator()
        self.policies = PolicyEngine(policy_wasm)

    def run(
        self, values: Json, release: str = DEFAULT_RELEASE, namespace: str = DEFAULT_NAMESPACE
    ) -> GateResult:
        result = GateResult()
        merged = self._sdk.merged_values(values)
        for violation in self.schema.violations(merged):
            result.findings.append(
                Finding(
                    CHECK_VALUES,
                    Level.DENY,
                    "SCHEMA",
                    violation.path or "<root>",
                    violation.message,
                )
            )
        if result.denied:
            return result
        result.findings.extend(
            Finding(CHECK_VALUES, Level.WARN, advice.rule, advice.key, advice.message)
            for advice in advise(merged)
        )
        try:
            result.manifests = self.renderer.render(values, release=release, namespace=namespace)
        except RenderError as error:
            message = " ".join(str(error).split())  # Helm's multi-line report, on one line
            result.findings.append(Finding(CHECK_RENDER, Level.DENY, "RENDER", "", message))
            return result
        result.findings.extend(self.kubernetes_findings(result.manifests))
        result.findings.extend(runtime_findings(result.manifests))
        result.findings.extend(policy_finding(v) for v in self.policies.evaluate(result.manifests))
        return result

    def kubernetes_findings(self, manifests: Sequence[Manifest]) -> list[Finding]:
        return [
            Finding(
                CHECK_KUBERNETES,
                Level.DENY,
                f"K8S-{self.kubernetes.version}",
                f"{manifest.kind} {manifest.name}",
                message,
                manifest.source,
            )
            for manifest in manifests
            for message in self.kubernetes.violations(manifest)
        ]


def runtime_findings(manifests: Sequence[Manifest]) -> list[Finding]:
    """What `checkpoint-runtime run` would refuse at startup on the rendered config.json (and,
    MEM-1, in a container with the rendered memory limit)."""
    return [
        Finding(
            CHECK_RUNTIME,
            Level.DENY,
            refusal.rule,
            refusal.values_key,
            f"{refusal.message} (the runtime refuses "
            + (
                "to start under this memory limit"
                if refusal.rule == runtime_check.MEMORY_RULE
                else f"config key {refusal.config_key or '<root>'} at startup"
            )
            + ": the pods would crash-loop)",
            refusal.source,
        )
        for refusal in runtime_check.refusals(manifests)
    ]


def policy_finding(verdict: Verdict) -> Finding:
    return Finding(
        CHECK_POLICY, verdict.level, verdict.rule, verdict.obj, verdict.message, verdict.source
    )
