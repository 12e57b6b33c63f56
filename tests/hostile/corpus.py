"""The hostile-input corpus: every case is one command line of the installed `checkpoint-runtime`
with the files it reads, and the outcome it must have under the exit contract (0 success,
1 a finding, 2 a named error with its name, never 3), within 10 s and 256 MiB.

`{dir}` in an argument is the case's own folder. A case with `store` runs over a file store
the test writes first (then poisons as named); the store must be byte-for-byte unchanged after.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

OK, FINDING, ERROR = 0, 1, 2

Content = str | bytes | Callable[[], bytes]


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]
    code: int
    name: str | None = None  # the error name of a code-2 case
    files: Mapping[str, Content] = field(default_factory=dict)
    store: str | None = None  # None, or how the prepared store is poisoned: "good", "empty", ...
    env: Mapping[str, str] = field(default_factory=dict)


CASES: list[Case] = []


def case(id: str, *argv: str, code: int, name: str | None = None, **extra: Any) -> None:
    CASES.append(Case(id, tuple(argv), code, name, **extra))


# ---- runtime configs: `run --check-config` -----------------------------------------------------

FEED = {"kind": "objectstore", "feed": "f1", "url": "file:///tmp/bucket"}
FLOW = {"kind": "flowlogs", "url": "http://127.0.0.1:9/flows"}


def config(**top: Any) -> dict[str, Any]:
    document: dict[str, Any] = {"store": {"backend": "file", "path": "{dir}/store"}}
    document.update(top)
    return document


def feed(**fields: Any) -> dict[str, Any]:
    return config(collectors=[{**FEED, **fields}])


def flow(**fields: Any) -> dict[str, Any]:
    return config(collectors=[{**FLOW, **fields}])


def check(id: str, document: Any, code: int = ERROR, name: str | None = "ConfigError") -> None:
    text = (
        document
        if isinstance(document, str | bytes) or callable(document)
        else json.dumps(document)
    )
    case(
        f"check-config/{id}",
        "run",
        "--check-config",
        "--config",
        "{dir}/c.json",
        code=code,
        name=None if code == OK else name,
        files={"c.json": text},
    )


def _big_collectors(count: int) -> Callable[[], bytes]:
    return lambda: json.dumps(
        config(collectors=[{**FEED, "feed": f"f{i}"} for i in range(count)])
    ).encode()


def _deep_json(depth: int) -> Callable[[], bytes]:
    return lambda: ("[" * depth + "]" * depth).encode()


def _url(size: int) -> Callable[[], bytes]:
    return lambda: json.dumps(feed(url="file:///" + "a" * size)).encode()


check("good", feed(), OK)
check("max-seen-keys-5000.0", feed(maxSeenKeys=5000.0), OK)
check("not-json", "{not json")
check("empty-file", "")
check("a-list", "[1, 2]")
check("a-string", '"store"')
check("a-number", "42")
check("null", "null")
check("nan-literal", '{"collectors": [], "store": {"backend": "file", "deadlineSeconds": NaN}}')
check("infinity-literal", '{"store": {"backend": "file", "deadlineSeconds": Infinity}}')
check("minus-infinity", '{"store": {"backend": "file", "debounceSeconds": -Infinity}}')
check("nan-timing", '{"leaderElection": {"leaseDurationSeconds": NaN}}')
check("not-utf8", b"\xff\xfe{\x00}\x00")
check("deep-50000", _deep_json(50_000))
check("deep-100-objects", '{"a":' * 100 + "1" + "}" * 100, name="InputLimitError")
check("file-2mb", lambda: b" " * 2_000_000 + b"{}", name="InputLimitError")
check("collectors-600k-file-size", _big_collectors(20_000), name="InputLimitError")
check("collectors-100", _big_collectors(100), name="InputLimitError")
check("url-5mb", _url(5_000_000), name="InputLimitError")
check("url-100kb", _url(100_000), name="InputLimitError")
check("url-3000", _url(3_000))
check("url-bad-percent", feed(url="file:///tmp/%zz"))
check("url-gs", feed(url="gs://bucket/feed"))
check("url-memory", feed(url="memory://feed"))
check("url-plain-path", feed(url="/data/feed"))
check("url-unicode", feed(url="file:///tmp/café"))
check("url-space", feed(url="file:///tmp/a b"))
check("url-not-a-string", feed(url=["file:///tmp"]))
check("url-percent-run", feed(url="s3://b/" + "%41" * 20_000))  # maxLength, linear pattern
check("http-url-ftp", flow(url="ftp://host/flows"))
check("http-url-backtrack", flow(url="http://" + "%4" * 20_000))
check("http-url-1900-percent", flow(url="http://h/" + "%4" * 600 + "!"))
for feed_name in ["UPPER", "a" * 64, "flowlogs", "", "a/b", "-a", "a.", 7]:
    check(f"feed-{str(feed_name)[:12] or 'empty'}", feed(feed=feed_name))
check("tailnet-bad", feed(tailnet="Bad_Tailnet"))
check("tailnet-kind", feed(tailnet="objectstore"))
for value in [0, -1, 10_000_000, "5000", True, None, 1.5]:
    check(f"max-seen-keys-{value}", feed(maxSeenKeys=value))
for value in [1e-300, 0, -1, 0.05, 1e9, "10", None]:
    check(f"poll-seconds-{value}", feed(pollSeconds=value))
check("flowlogs-poll-1e-300", flow(pollSeconds=1e-300))
check("replay-window-negative", flow(replayWindowSeconds=-1))
check("replay-window-huge", flow(replayWindowSeconds=1e9))
for value in [0, -1, 601, 1e-9, "30"]:
    check(f"deadline-{value}", config(store={"backend": "file", "deadlineSeconds": value}))
for value in [-1, 301]:
    check(f"debounce-{value}", config(store={"backend": "file", "debounceSeconds": value}))
for election in [
    {"leaseDurationSeconds": 0},
    {"leaseDurationSeconds": 0.5},
    {"leaseDurationSeconds": 1e9},
    {"leaseDurationSeconds": 15.5},
    {"leaseDurationSeconds": 10, "renewDeadlineSeconds": 10},
    {"renewDeadlineSeconds": 2, "retryPeriodSeconds": 2},
    {"retryPeriodSeconds": 0},
    {"enabled": "yes"},
]:
    check(
        "election-" + "-".join(f"{k}={v}" for k, v in election.items()),
        config(leaderElection=election),
    )
for port in [-1, 0, 70000, 1.5, "8080"]:
    check(f"http-port-{port}", config(http={"port": port}))
for bind in ["localhost", "999.1.1.1", "x" * 10_000]:
    check(f"bind-{bind[:12]}", config(http={"bindAddress": bind}))
check("sink-kafka", config(sink={"kind": "kafka"}))
check("sink-file-without-path", config(sink={"kind": "file"}))
check("sink-path-a-folder", config(sink={"kind": "file", "path": "{dir}"}))
check("sink-under-proc", config(sink={"kind": "file", "path": "/proc/nope/records"}))
check("sink-under-a-file", config(sink={"kind": "file", "path": "{dir}/c.json/records"}))
check("backend-s3", config(store={"backend": "s3"}))
check(
    "store-path-a-file",
    config(store={"backend": "file", "path": "{dir}/c.json"}),
    name="StorePathError",
)
check(
    "store-under-proc",
    config(store={"backend": "file", "path": "/proc/nope/store"}),
    name="StorePathError",
)
check(
    "store-under-sys", config(store={"backend": "file", "path": "/sys/nope"}), name="StorePathError"
)
check("store-path-empty", config(store={"backend": "file", "path": ""}))
check("store-path-long", config(store={"backend": "file", "path": "/tmp/" + "a" * 5000}))
check("lease-name-upper", config(store={"backend": "file", "leaseName": "UPPER"}))
check("lease-name-300", config(store={"backend": "file", "leaseName": "a" * 300}))
check("namespace-bad", config(store={"backend": "kubernetes", "namespace": "Bad_NS"}))
check("legacy-name-bad", config(store={"backend": "kubernetes", "legacyConfigMap": "x/y"}))
check("discovery-bad", config(store={"backend": "kubernetes", "discovery": "dns"}))
check("unknown-top-level-key", config(extra=1))
check("unknown-kind", config(collectors=[{"kind": "kafka", "url": "x"}]))
check("collector-without-url", config(collectors=[{"kind": "objectstore", "feed": "f"}]))
check("collector-not-an-object", config(collectors=["objectstore"]))
check("collectors-an-object", config(collectors={"kind": "objectstore"}))
check("two-collectors-one-shard", config(collectors=[FLOW, FLOW]))
check("key-2000-chars", config(**{"k" * 2000: 1}), name="InputLimitError")
check("string-70k-unknown-key", config(note="x" * 70_000), name="InputLimitError")
check("list-20k-items", config(note=list(range(20_000))), name="InputLimitError")
check("store-not-an-object", config(store="file"))
check("oversize-projection", feed(maxSeenKeys=1_000_000))

# ---- `run` itself: arguments and credentials ---------------------------------------------------

# argv prefixes the cases below share
KUBE_RUN = ("run", "--config", "{dir}/c.json", "--kubeconfig")
INSPECT = ("inspect", "--path", "{dir}/store")
MIGRATE = ("migrate", "--path", "{dir}/store", "--legacy-name", "legacy")
PROJECT = ("project", "--config", "{dir}/c.json")
SET_ASIDE = ("set-aside", "--path", "{dir}/store")

GOOD_CONFIG = {"c.json": json.dumps(feed())}
KUBE_CONFIG = {"c.json": json.dumps(config(store={"backend": "kubernetes", "namespace": "ns"}))}
for port in ["-1", "99999", "abc", "1e3"]:
    case(
        f"run/http-port-{port}",
        "run",
        "--config",
        "{dir}/c.json",
        "--http-port",
        port,
        code=ERROR,
        name="UsageError",
        files=GOOD_CONFIG,
    )
case(
    "run/bind-hostname",
    "run",
    "--check-config",
    "--config",
    "{dir}/c.json",
    "--bind",
    "localhost",
    code=ERROR,
    name="ConfigError",
    files=GOOD_CONFIG,
)
case("run/config-missing", "run", "--config", "{dir}/absent.json", code=ERROR, name="ConfigError")
case("run/config-a-folder", "run", "--config", "{dir}", code=ERROR, name="ConfigError")
case("run/unknown-option", "run", "--bogus", code=ERROR, name="UsageError")
case(
    "run/config-dev-zero",
    "run",
    "--check-config",
    "--config",
    "/dev/zero",
    code=ERROR,
    name="InputLimitError",
)
KUBECONFIGS: dict[str, Content] = {
    "invalid-yaml": "apiVersion: v1\nclusters: [\n",
    "a-list": "- 1\n- 2\n",
    "empty": "",
    "no-contexts": "apiVersion: v1\nkind: Config\n",
    "billion-laughs": "a: &a [x,x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: [*e,*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
    "size-2mb": lambda: b"#" * 2_000_000,
    "binary": b"\x00\x01\x02\xff",
    "deep": "[" * 5000 + "]" * 5000,
}
for label, content in KUBECONFIGS.items():
    name = "InputLimitError" if label in ("billion-laughs", "size-2mb") else "ConfigError"
    case(
        f"run/kubeconfig-{label}",
        *KUBE_RUN,
        "{dir}/kubeconfig",
        code=ERROR,
        name=name,
        files={**KUBE_CONFIG, "kubeconfig": content},
    )
case(
    "run/kubeconfig-missing",
    *KUBE_RUN,
    "{dir}/none",
    code=ERROR,
    name="ConfigError",
    files=KUBE_CONFIG,
)
case(
    "run/kubeconfig-a-folder",
    *KUBE_RUN,
    "{dir}",
    code=ERROR,
    name="ConfigError",
    files=KUBE_CONFIG,
)
case(
    "run/no-credentials",
    "run",
    "--config",
    "{dir}/c.json",
    code=ERROR,
    name="ConfigError",
    files=KUBE_CONFIG,
)
# every poisoned store folder and the error it must give, for each command that opens it
POISONED_STORES = [
    ("empty", "UnreadableShardError"),
    ("no-header", "UnreadableShardError"),
    ("truncated", "CorruptShardError"),
    ("foreign", "UnreadableShardError"),
    ("gzip-bomb", "CorruptShardError"),
    ("garbage-blob", "CorruptShardError"),
]
for poison, name in POISONED_STORES:
    case(
        f"run/store-{poison}",
        "run",
        "--config",
        "{dir}/store.json",
        "--http-port",
        "0",
        code=ERROR,
        name=name,
        store=poison,
    )

# ---- inspect, migrate, project, set-aside --------------------------------------------------

for poison, name in POISONED_STORES:
    case(
        f"inspect/store-{poison}",
        *INSPECT,
        code=ERROR,
        name=name,
        store=poison,
    )
    case(
        f"migrate/store-{poison}",
        *MIGRATE,
        code=ERROR,
        name=name,
        store=poison,
    )
case("inspect/good-store", "inspect", "--path", "{dir}/store", "--json", code=OK, store="good")
case("inspect/a-file", "inspect", "--path", "/etc/passwd", code=ERROR, name="NoStoreError")
case("inspect/missing", "inspect", "--path", "{dir}/none", code=ERROR, name="NoStoreError")
case("inspect/proc", "inspect", "--path", "/proc/nope", code=ERROR, name="NoStoreError")
case("inspect/empty-folder", "inspect", "--path", "{dir}", code=ERROR, name="NoStoreError")
case(
    "inspect/unknown-lease",
    *INSPECT,
    "--lease-name",
    "gamma",
    code=ERROR,
    name="NoStoreError",
    store="good",
)
case(
    "inspect/both-path-and-namespace",
    "inspect",
    "--path",
    "{dir}",
    "--namespace",
    "x",
    code=ERROR,
    name="ConfigError",
)
case("inspect/neither", "inspect", code=ERROR, name="ConfigError")
for deadline in ["nan", "inf", "-1", "0", "abc", "1e9", "-inf"]:
    case(
        f"inspect/deadline-{deadline}",
        *INSPECT,
        "--deadline",
        deadline,
        code=ERROR,
        name="UsageError",
        store="good",
    )
case(
    "inspect/config-bad",
    "inspect",
    "--config",
    "{dir}/c.json",
    code=ERROR,
    name="ConfigError",
    files={"c.json": "{"},
)
case(
    "migrate/no-legacy-name",
    "migrate",
    "--path",
    "{dir}/store",
    code=ERROR,
    name="NoLegacyError",
    store="good",
)
case(
    "migrate/legacy-missing",
    *MIGRATE,
    code=ERROR,
    name="NoLegacyError",
    store="good",
)
LEGACIES: dict[str, str] = {
    "not-json": "{not json",
    "a-list": "[1, 2]",
    "numbers": '{"tn/flowlogs/cursor": 5}',
    "bad-key": '{"no such key": "x"}',
}
for label, value in LEGACIES.items():
    document = {"annotations": {}, "data": {"checkpoints.json": value}, "version": "1"}
    case(
        f"migrate/legacy-{label}",
        *MIGRATE,
        code=ERROR,
        name=None if label != "not-json" else "LegacyFormatError",
        store="good",
        files={"store/legacy.legacy.json": json.dumps(document)},
    )
case(
    "migrate/legacy-file-garbage",
    *MIGRATE,
    code=ERROR,
    name=None,
    store="good",
    files={"store/legacy.legacy.json": b"\x00garbage"},
)
case(
    "project/misfit",
    *PROJECT,
    code=FINDING,
    files={"c.json": json.dumps({"collectors": [{**FEED, "maxSeenKeys": 1_000_000}]})},
)
case("project/good", "project", "--config", "{dir}/c.json", code=OK, files=GOOD_CONFIG)
case(
    "project/bad-config",
    *PROJECT,
    code=ERROR,
    name="ConfigError",
    files={"c.json": "[]"},
)
case(
    "project/bad-shape",
    *PROJECT,
    "--shape",
    "x",
    code=ERROR,
    name="UsageError",
    files=GOOD_CONFIG,
)
case(
    "set-aside/unknown-object",
    *SET_ASIDE,
    "--object",
    "nope",
    code=ERROR,
    name="CheckpointError",
    store="good",
)
case(
    "set-aside/traversal",
    *SET_ASIDE,
    "--object",
    "../c",
    code=ERROR,
    name="CheckpointError",
    store="good",
)
case(
    "set-aside/without-object",
    *SET_ASIDE,
    code=ERROR,
    name="UsageError",
    store="good",
)
case("cli/unknown-command", "frobnicate", code=ERROR, name="UsageError")
case("cli/no-command", code=ERROR, name="UsageError")

# ---- the gate --------------------------------------------------------------------------------


def gate(id: str, *argv: str, code: int, name: str | None = None, **extra: Any) -> None:
    case(f"gate/{id}", "gate", *argv, code=code, name=name, **extra)


def values(id: str, text: Content, code: int = ERROR, name: str | None = "ValuesFileError") -> None:
    gate(
        id,
        "-f",
        "{dir}/v.yaml",
        code=code,
        name=None if code != ERROR else name,
        files={"v.yaml": text},
    )


LAUGHS = "".join(f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 10))
values("billion-laughs", 'l0: &l0 ["lol"]\n' + LAUGHS, name="InputLimitError")
values(
    "billion-laughs-342-bytes",
    "a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
    "c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
    "e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
    "g: [*f,*f,*f,*f,*f,*f,*f,*f,*f]\n",
    name="InputLimitError",
)
values("aliases-101", "a: &a 1\nb: [" + ", ".join(["*a"] * 101) + "]\n", name="InputLimitError")
values(
    "merge-key-bomb",
    "a: &a {x: 1}\nb: &b {<<: *a, y: [*a, *a, *a, *a, *a, *a, *a, *a]}\n"
    "c: [" + ", ".join(["*b"] * 99) + "]\n",
    name="InputLimitError",
)
values("deep-flow-50000", "a: " + "[" * 50_000 + "]" * 50_000 + "\n")
values(
    "deep-block-100",
    "".join(f"{'  ' * i}k{i}:\n" for i in range(100)) + "  " * 100 + "v: 1\n",
    name="InputLimitError",
)
values("size-2mb", lambda: b"a: " + b"x" * 2_000_000 + b"\n", name="InputLimitError")
values("size-50mb", lambda: b"a: " + b"x" * 50_000_000 + b"\n", name="InputLimitError")
values(
    "url-5mb",
    lambda: (
        b"checkpoint:\n  collectors:\n  - kind: objectstore\n    feed: a\n"
        b"    url: s3://b/" + b"a" * 5_000_000 + b"\n"
    ),
    name="InputLimitError",
)
values(
    "url-100kb",
    lambda: (
        b"checkpoint:\n  collectors:\n  - kind: objectstore\n    feed: a\n"
        b"    url: s3://b/" + b"a" * 100_000 + b"\n"
    ),
    name="InputLimitError",
)
values(
    "url-3000",
    "checkpoint:\n  collectors:\n  - kind: objectstore\n    feed: a\n"
    "    url: s3://b/" + "a" * 3000 + "\n",
    code=FINDING,
)
values(
    "url-percent-backtrack",
    "checkpoint:\n  collectors:\n  - kind: flowlogs\n    url: http://h/" + "%4" * 1000 + "\n",
    code=FINDING,
)
values("a-list", "- 1\n- 2\n")
values("a-scalar", "hello\n")
values("invalid-yaml", "checkpoint:\n  collectors: [1,\n")
values("tabs", "a:\n\tb: 1\n")
values("binary", b"\x00\x01\xff\xfe")
values("latin-1", "image:\n  tag: caf\xe9\n".encode("latin-1"))
values("nan-timing", "checkpoint:\n  store:\n    deadlineSeconds: .nan\n")
values("inf-timing", "checkpoint:\n  leaderElection:\n    leaseDurationSeconds: .inf\n")
values("unknown-tag", "a: !!python/object:os.system 'id'\n")
values("two-documents", "a: 1\n---\nb: 2\n")
values("key-2000-implicit", "k" * 2000 + ": 1\n")  # YAML caps implicit keys at 1024
values("key-2000-explicit", "? " + "k" * 2000 + "\n: 1\n", name="InputLimitError")
values(
    "many-keys",
    lambda: "".join(f"k{i}: 1\n" for i in range(20_000)).encode(),
    name="InputLimitError",
)
values(
    "poll-1e-300",
    "checkpoint:\n  collectors:\n  - kind: flowlogs\n    url: http://h/f\n"
    "    pollSeconds: 1e-300\n",
    code=FINDING,
)
values(
    "poll-0.05",
    "checkpoint:\n  collectors:\n  - kind: flowlogs\n    url: http://h/f\n    pollSeconds: 0.05\n",
    code=FINDING,
)
values(
    "max-seen-keys-string",
    "checkpoint:\n  collectors:\n  - kind: objectstore\n    feed: a\n"
    "    url: s3://b/p\n    maxSeenKeys: '100'\n",
    code=FINDING,
)
values("replicas-negative", "replicaCount: -1\n", code=FINDING)
values("store-s3", "checkpoint:\n  store:\n    backend: s3\n", code=FINDING)
values("image-latest", "image:\n  tag: latest\n", code=FINDING)
values("deadline-zero", "checkpoint:\n  store:\n    deadlineSeconds: 0\n", code=FINDING)
values("unknown-key", "bogus: 1\n", code=FINDING)
values("run-as-root", "podSecurityContext:\n  runAsUser: 0\n", code=FINDING)
values("empty-file", "", code=OK)
values("comment-only", "# nothing\n", code=OK)
values("null-document", "null\n", code=OK)
gate("values-missing", "-f", "{dir}/none.yaml", code=ERROR, name="ValuesFileError")
gate("values-a-folder", "-f", "{dir}", code=ERROR, name="ValuesFileError")
gate("values-dev-zero", "-f", "/dev/zero", code=ERROR, name="InputLimitError")
gate("set-no-value", "--set", "replicaCount", code=ERROR, name="ValuesFileError")
gate("set-bad-index", "--set", "a[x]=1", code=ERROR, name="ValuesFileError")
gate("set-huge-index", "--set", "a[999999]=1", code=ERROR, name="ValuesFileError")
gate("set-70k", "--set", "a=" + "x" * 70_000, code=ERROR, name="ValuesFileError")
gate("set-json-bad", "--set-json", "a={bad", code=ERROR, name="ValuesFileError")
gate("set-file-missing", "--set-file", "a={dir}/none", code=ERROR, name="ValuesFileError")
gate(
    "set-list-merge",
    "--set",
    "tolerations[0].key=a",
    "--set",
    "tolerations[0].operator=Exists",
    code=OK,
)
gate("set-replicas-string", "--set-string", "replicaCount=2", code=FINDING)
gate("set-json-replicas", "--set-json", "replicaCount=2", code=OK)
gate("set-unknown-key", "--set", "bogus=1", code=FINDING)
gate(
    "set-index-into-file-list",
    "-f",
    "{dir}/v.yaml",
    "--set",
    "checkpoint.collectors[0].maxSeenKeys=100",
    code=OK,
    files={
        "v.yaml": "checkpoint:\n  collectors:\n  - kind: objectstore\n    feed: a\n"
        "    url: s3://b/p\n"
    },
)
gate("release-60", "--release", "r" * 60, code=ERROR, name="UsageError")
gate("release-54", "--release", "r" * 54, code=ERROR, name="UsageError")
gate("release-upper", "--release", "UPPER", code=ERROR, name="UsageError")
gate("release-empty", "--release", "", code=ERROR, name="UsageError")
gate("namespace-bad", "--namespace", "Bad_NS", code=ERROR, name="UsageError")
gate("namespace-long", "--namespace", "n" * 64, code=ERROR, name="UsageError")
gate(
    "matrix-with-values",
    "--matrix",
    "-f",
    "{dir}/v.yaml",
    code=ERROR,
    name="UsageError",
    files={"v.yaml": "replicaCount: 2\n"},
)
gate("matrix-with-set", "--matrix", "--set", "replicaCount=2", code=ERROR, name="UsageError")
gate("chart-tmp", "--chart", "/tmp", code=ERROR, name="ChartError")
gate("chart-empty-folder", "--chart", "{dir}", code=ERROR, name="ChartError")
gate("chart-missing", "--chart", "{dir}/none", code=ERROR, name="ChartError")
gate("chart-a-file", "--chart", "/etc/passwd", code=ERROR, name="ChartError")
gate(
    "chart-yaml-garbage",
    "--chart",
    "{dir}/chart",
    code=ERROR,
    name="ChartError",
    files={"chart/Chart.yaml": "::: not yaml :::\n"},
)
gate(
    "helm-missing", "--engine", "cli", "--helm", "/nonexistent/helm", code=ERROR, name="UsageError"
)
gate("helm-a-folder", "--engine", "cli", "--helm", "{dir}", code=ERROR, name="UsageError")
gate(
    "helm-not-executable", "--engine", "cli", "--helm", "/etc/passwd", code=ERROR, name="UsageError"
)
gate("junit-a-folder", "--junit-xml", "{dir}", code=ERROR, name="UsageError")
gate("junit-under-a-file", "--junit-xml", "/etc/passwd/gate.xml", code=ERROR, name="UsageError")
gate("policy-missing", "--policy", "{dir}/none.wasm", code=ERROR, name="ChartError")
gate("policy-a-folder", "--policy", "{dir}", code=ERROR, name="ChartError")
gate("policy-not-wasm", "--policy", "/etc/passwd", code=ERROR, name="ChartError")
gate("engine-unknown", "--engine", "kustomize", code=ERROR, name="UsageError")
gate("unknown-option", "--frobnicate", code=ERROR, name="UsageError")
