"""Values that would put a credential in clear, or undo a restriction, are refused by the chart
itself (`helm template` fails, naming the key and never repeating the value) and so by the gate.

Credentials: user information in a collector URL (stored in the runtime's ConfigMap, shown in the
collectors' errors), an extraEnv literal whose name or value looks like a secret (stored in the
Deployment). Widening: a /0 egress CIDR (every address of its family) unless
networkPolicy.egress.allowAnyAddress says so. The schema's own refusals (a token the API server
extends to a year, a RoleBinding to the default ServiceAccount) are in test_values_rejected.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from checkpoint_gate.manifests import RenderError
from checkpoint_gate.pipeline import Gate
from checkpoint_gate.render import CliRenderer

SECRET = "hunter2-Zx9"


def collector(url: str) -> dict[str, Any]:
    if url.startswith("http"):
        return {"checkpoint": {"collectors": [{"kind": "flowlogs", "url": url}]}}
    return {"checkpoint": {"collectors": [{"kind": "objectstore", "feed": "a", "url": url}]}}


def env(name: str, value: str) -> dict[str, Any]:
    return {
        "extraEnv": [{"name": "AWS_REGION", "value": "eu-west-1"}, {"name": name, "value": value}]
    }


def egress(cidr: str, allow: bool = False) -> dict[str, Any]:
    return {
        "networkPolicy": {
            "enabled": True,
            "egress": {
                "restrict": True,
                "allowAnyAddress": allow,
                "apiServer": {"cidrs": ["10.0.0.1/32"]},
                "to": [{"cidrs": [cidr], "ports": [{"port": 443}]}],
            },
        }
    }


# name -> (values, the key the refusal names, what it says)
REFUSED: dict[str, tuple[dict[str, Any], str, str]] = {
    "https-url-with-user-and-password": (
        collector(f"https://reader:{SECRET}@flows.example:8443/v1"),
        "checkpoint.collectors[0].url",
        "carries user information",
    ),
    "http-url-with-a-token-as-user": (
        collector(f"http://{SECRET}@flows.example/v1"),
        "checkpoint.collectors[0].url",
        "carries user information",
    ),
    "s3-url-with-keys": (
        collector(f"s3://AKIAEXAMPLE:{SECRET}@bucket/prefix/"),
        "checkpoint.collectors[0].url",
        "carries user information",
    ),
    "env-password-literal": (
        env("DB_PASSWORD", SECRET),
        "extraEnv[1] (DB_PASSWORD)",
        "whose name looks like a secret",
    ),
    "env-token-literal": (
        env("api_token", SECRET),
        "extraEnv[1] (api_token)",
        "whose name looks like a secret",
    ),
    "env-aws-secret-literal": (
        env("AWS_SECRET_ACCESS_KEY", SECRET),
        "extraEnv[1] (AWS_SECRET_ACCESS_KEY)",
        "whose name looks like a secret",
    ),
    "env-value-an-access-key": (
        env("SOMETHING", f"AKIAABCDEFGHIJKLMNOP{SECRET}"),
        "extraEnv[1] (SOMETHING)",
        "that looks like a secret",
    ),
    "env-value-a-url-with-password": (
        env("ENDPOINT", f"https://u:{SECRET}@x.example/"),
        "extraEnv[1] (ENDPOINT)",
        "that looks like a secret",
    ),
    "egress-to-every-ipv4-address": (
        egress("0.0.0.0/0"),
        "networkPolicy.egress.to[0].cidrs[0]",
        "allows every address",
    ),
    "egress-to-every-ipv6-address": (
        egress("::/0"),
        "networkPolicy.egress.to[0].cidrs[0]",
        "allows every address",
    ),
}

ACCEPTED: dict[str, dict[str, Any]] = {
    "https-url-with-an-at-in-the-path": collector("https://flows.example/v1/users/@me"),
    "env-secret-from-a-secret": {
        "extraEnv": [
            {
                "name": "DB_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
            }
        ]
    },
    "env-plain-literal": env("LOG_FORMAT", "json"),
    "egress-to-every-address-acknowledged": egress("::/0", allow=True),
}

GATE = Gate()


@pytest.mark.parametrize(("values", "key", "says"), list(REFUSED.values()), ids=list(REFUSED))
def test_plain_helm_template_refuses_naming_the_key_not_the_value(
    cli: CliRenderer, values: dict[str, Any], key: str, says: str
) -> None:
    with pytest.raises(RenderError) as refused:
        cli.render(values)
    message = str(refused.value)
    assert f"checkpoint-runtime: invalid values: {key}" in message
    assert says in message
    assert SECRET not in message


@pytest.mark.parametrize(("values", "key", "says"), list(REFUSED.values()), ids=list(REFUSED))
def test_the_gate_denies_without_repeating_the_value(
    values: dict[str, Any], key: str, says: str
) -> None:
    result = GATE.run(values)
    denied = [f for f in result.findings if f.level.value == "deny"]
    assert [f.check for f in denied] == ["render"]
    assert key in denied[0].message
    assert all(SECRET not in f.message for f in result.findings)


@pytest.mark.parametrize("values", list(ACCEPTED.values()), ids=list(ACCEPTED))
def test_what_is_not_a_secret_or_a_widening_passes(values: dict[str, Any]) -> None:
    result = GATE.run(values)
    assert [f.message for f in result.findings if f.level.value == "deny"] == []
