"""The runtime configuration (schemas/runtime-config.schema.json) as typed settings.

Validation happens before anything touches the API: the schema first (the error names the key
path, e.g. `collectors[0].feed`), then what a schema cannot say (the election timings' order,
collector namespaces that would share a shard). No config at all means the embedded default:
the file store with no collectors.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema

from checkpoint_runtime import limits, schema_errors
from checkpoint_runtime.collectors.kind import CollectorSettings
from checkpoint_runtime.collectors.registry import BUILTIN, KindTable
from checkpoint_runtime.constants import (
    DEFAULT_DEADLINE_SECONDS,
    DEFAULT_DEBOUNCE_SECONDS,
    DEFAULT_ETCD_QUOTA_BYTES,
    DEFAULT_FILE_STORE_PATH,
    DEFAULT_HTTP_BIND,
    DEFAULT_HTTP_PORT,
    DEFAULT_MAX_CHUNKS,
    DEFAULT_STORE_NAME,
    DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND,
    DISCOVERY_LABELS,
    DISCOVERY_NAMES,
    LEASE_DURATION_SECONDS,
    MAX_COLLECTORS,
    RENEW_DEADLINE_SECONDS,
    RETRY_PERIOD_SECONDS,
    RUNTIME_CONFIG_SCHEMA,
)
from checkpoint_runtime.election.timings import ElectionTimings
from checkpoint_runtime.errors import ConfigError, InputLimitError
from checkpoint_runtime.resources import schema_file

# The default of every store, leaderElection and http setting a config may leave out, by its
# config key (the schema's `default` keywords and the chart's values.yaml are checked against it).
CONFIG_DEFAULTS: dict[str, dict[str, Any]] = {
    "store": {
        "leaseName": DEFAULT_STORE_NAME,
        "deadlineSeconds": DEFAULT_DEADLINE_SECONDS,
        "debounceSeconds": DEFAULT_DEBOUNCE_SECONDS,
        "discovery": DISCOVERY_LABELS,
        "maxChunks": DEFAULT_MAX_CHUNKS,
        "writeBudgetBytesPerSecond": DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND,
        "etcdQuotaBytes": DEFAULT_ETCD_QUOTA_BYTES,
        "buckets": 1,
    },
    "leaderElection": {
        "enabled": True,
        "leaseDurationSeconds": LEASE_DURATION_SECONDS,
        "renewDeadlineSeconds": RENEW_DEADLINE_SECONDS,
        "retryPeriodSeconds": RETRY_PERIOD_SECONDS,
    },
    "http": {"port": DEFAULT_HTTP_PORT, "bindAddress": DEFAULT_HTTP_BIND},
}

EMBEDDED_DEFAULT: dict[str, Any] = {
    "store": {"backend": "file", "path": DEFAULT_FILE_STORE_PATH},
    "collectors": [],
}


@dataclass(frozen=True)
class StoreSettings:
    backend: str
    namespace: str | None
    lease_name: str
    path: str | None
    legacy_config_map: str | None
    deadline_seconds: float
    debounce_seconds: float
    discovery: str = DISCOVERY_LABELS
    """How the kubernetes backend finds its shards: by label (list) or by name (get only)."""
    max_chunks: int = DEFAULT_MAX_CHUNKS
    """Chunk slots per generation of one shard (a shard spans at most this many besides its
    head); the projection and a name-pinned Role use the same number."""
    write_budget_bytes_per_second: int = DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND
    """Bytes of shard values the store sends to the API per second at most."""
    etcd_quota_bytes: int = DEFAULT_ETCD_QUOTA_BYTES
    """The etcd space quota the operator declares, for the projection's etcd report."""
    buckets: int = 1
    """Leadership buckets (election/buckets.py): 1 is one Lease and one leader for all."""


@dataclass(frozen=True)
class RuntimeSettings:
    store: StoreSettings
    election_enabled: bool
    timings: ElectionTimings
    http_port: int
    http_bind: str
    sink_kind: str
    sink_path: str | None
    collectors: list[CollectorSettings] = field(default_factory=list)
    kinds: KindTable = BUILTIN
    """The collector kinds the config was parsed with; the projection and the process look a
    collector's kind up here."""
    admission_policy: str | None = None
    """The name of the store's ValidatingAdmissionPolicy (and binding) when the config says it
    is enabled: `run` proves it is enforced before it starts (runtime/admission.py)."""


def schema_path() -> Path:
    """The runtime-config schema the package ships."""
    return schema_file(RUNTIME_CONFIG_SCHEMA)


@cache
def _validator(kinds: KindTable) -> jsonschema.protocols.Validator:
    """The config schema's validator, with one `collectors[]` alternative per kind of `kinds`
    (built once per table: a table never changes)."""
    path = schema_path()
    try:
        schema = json.loads(path.read_text())
    except OSError as error:
        raise ConfigError("", f"runtime config schema not found at {path}: {error}") from None
    schema["properties"]["collectors"]["items"]["oneOf"] = [
        dict(spec.schema) if spec.schema is not None else {"$ref": f"#/$defs/{name}"}
        for name, spec in kinds.kinds().items()
    ]
    cls = jsonschema.validators.validator_for(schema)
    return cls(schema)


def validate(document: Any, kinds: KindTable = BUILTIN) -> None:
    """Raise ConfigError naming the key path of the first schema violation (after the bounds
    of limits.check_document, so that no pattern ever runs on a huge string)."""
    limits.check_document(document, "")
    collectors = document.get("collectors") if isinstance(document, dict) else None
    if isinstance(collectors, list) and len(collectors) > MAX_COLLECTORS:
        raise InputLimitError(
            "collectors", f"{len(collectors)} collectors, over the limit of {MAX_COLLECTORS}"
        )
    found = schema_errors.violations(_validator(kinds).iter_errors(document))
    if found:
        path, message = found[0]
        raise ConfigError(path, message)


def _reject_non_finite(name: str) -> Any:
    """NaN and Infinity are not JSON (RFC 8259); Python's parser admits them, and NaN would
    slip past every range check of the schema and of the election timings."""
    raise ValueError(f"{name} is not a JSON number")


def load_document(path: str | None) -> dict[str, Any]:
    if path is None:
        return json.loads(json.dumps(EMBEDDED_DEFAULT))  # type: ignore[no-any-return]
    try:
        text = limits.read_text(path, f"config file {path}")
    except UnicodeDecodeError as error:
        raise ConfigError("", f"config file {path} is not UTF-8: {error}") from None
    except OSError as error:
        raise ConfigError("", f"cannot read config file {path}: {error}") from None
    try:
        document = json.loads(text, parse_constant=_reject_non_finite)
    except RecursionError:
        raise ConfigError("", f"config file {path} is nested too deeply") from None
    except ValueError as error:
        raise ConfigError("", f"config file {path} is not JSON: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError("", "the config must be a JSON object")
    return document


def parse(document: dict[str, Any], kinds: KindTable = BUILTIN) -> RuntimeSettings:
    """Validate a config document and turn it into settings (its collectors of `kinds`)."""
    validate(document, kinds)
    document = _integral(document)
    store = {**CONFIG_DEFAULTS["store"], **(document.get("store") or {"backend": "file"})}
    backend = store["backend"]
    if backend == "file" and not store.get("path"):
        store = {**store, "path": DEFAULT_FILE_STORE_PATH}
    election = {**CONFIG_DEFAULTS["leaderElection"], **document.get("leaderElection", {})}
    timings = ElectionTimings(
        election["leaseDurationSeconds"],
        election["renewDeadlineSeconds"],
        election["retryPeriodSeconds"],
    )
    http = {**CONFIG_DEFAULTS["http"], **document.get("http", {})}
    sink = document.get("sink", {"kind": "stdout"})
    if sink["kind"] == "file" and not sink.get("path"):
        raise ConfigError("sink.path", "is required when sink.kind is 'file'")
    collectors = _collectors(document.get("collectors", []), kinds)
    bind = http["bindAddress"]
    try:
        ipaddress.ip_address(bind)
    except ValueError:
        raise ConfigError(
            "http.bindAddress",
            f"{bind!r} is not an IP address: give a literal IPv4 or IPv6 address, e.g. 0.0.0.0 "
            "(all IPv4 interfaces), :: (all interfaces) or 127.0.0.1 (this host only)",
        ) from None
    return RuntimeSettings(
        store=StoreSettings(
            backend=backend,
            namespace=store.get("namespace"),
            lease_name=store["leaseName"],
            path=store.get("path"),
            legacy_config_map=store.get("legacyConfigMap"),
            deadline_seconds=store["deadlineSeconds"],
            debounce_seconds=store["debounceSeconds"],
            discovery=store["discovery"],
            max_chunks=store["maxChunks"],
            write_budget_bytes_per_second=store["writeBudgetBytesPerSecond"],
            etcd_quota_bytes=store["etcdQuotaBytes"],
            buckets=_buckets(store, election["enabled"]),
        ),
        election_enabled=backend == "kubernetes" and election["enabled"],
        timings=timings,
        http_port=http["port"],
        http_bind=bind,
        sink_kind=sink["kind"],
        sink_path=sink.get("path"),
        collectors=collectors,
        kinds=kinds,
        admission_policy=_admission_policy(document, backend),
    )


def _buckets(store: dict[str, Any], election: bool) -> int:
    """More than one bucket needs what buckets are led with (the kubernetes store's Leases),
    and a legacy migration behind it: it runs with one bucket, which reads every shard."""
    buckets = int(store["buckets"])
    if buckets == 1:
        return buckets
    if not (store["backend"] == "kubernetes" and election):
        raise ConfigError(
            "store.buckets",
            f"{buckets} buckets need the kubernetes store with leader election enabled",
        )
    if store.get("legacyConfigMap"):
        raise ConfigError(
            "store.buckets",
            f"{buckets} buckets with store.legacyConfigMap: the legacy migration runs with one "
            "bucket; run it with buckets 1, then remove legacyConfigMap and raise buckets",
        )
    return buckets


def _admission_policy(document: dict[str, Any], backend: str) -> str | None:
    """The policy name when the config enables one (the kubernetes store only has one)."""
    policy = document.get("admissionPolicy") or {}
    if not policy.get("enabled"):
        return None
    if backend != "kubernetes":
        raise ConfigError(
            "admissionPolicy.enabled", "an admission policy needs the kubernetes store"
        )
    return str(policy["name"])


def _integral(value: Any) -> Any:
    """The document with every integral float as an int: JSON Schema counts 5000.0 as an
    integer, and the settings use such numbers as counts (the schema has bounded them)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _integral(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_integral(item) for item in value]
    return value


def _collectors(entries: list[dict[str, Any]], kinds: KindTable) -> list[CollectorSettings]:
    """Each entry's settings by its kind's factory; no two collectors may share a namespace."""
    collectors: list[CollectorSettings] = []
    owners: dict[str, int] = {}
    for index, entry in enumerate(entries):
        settings = kinds.parse_entry(entry, f"collectors[{index}]")
        if settings.namespace in owners:
            raise ConfigError(
                f"collectors[{index}]",
                f"collector namespace {settings.namespace!r} is already used by "
                f"collectors[{owners[settings.namespace]}] (two collectors would share one shard)",
            )
        owners[settings.namespace] = index
        collectors.append(settings)
    return collectors


def load_settings(path: str | None) -> RuntimeSettings:
    """Read, validate and parse the config file (None: the embedded file-store default)."""
    return parse(load_document(path))


def configured_shards(settings: RuntimeSettings) -> list[str] | None:
    """The shards a store that discovers by name reads (one per configured collector), or None
    when it discovers its shards by label (store.discovery=labels, and the file store)."""
    if settings.store.backend != "kubernetes" or settings.store.discovery != DISCOVERY_NAMES:
        return None
    return [collector.namespace for collector in settings.collectors]
