# checkpoint-runtime task runner. `scripts/just check` bootstraps just itself on a fresh machine.

set shell := ["bash", "-euo", "pipefail", "-c"]

venv := justfile_directory() / ".venv"
py := venv / "bin" / "python"
bin := venv / "bin"
chart := "charts/checkpoint-runtime"

# list the recipes
[group('help')]
default:
    @"{{ just_executable() }}" --justfile "{{ justfile() }}" --list

# create .venv and install the package with its dev tools, every package from scripts/setup/dev.lock by its hash (idempotent)
[group('setup')]
setup:
    scripts/setup/install.sh {{ venv }} dev

# install the package (editable) with only its gate extra into .venv from scripts/setup/gate.lock (no dev tools, no Go builds): what gate and render need; nothing to do after setup, which includes it (idempotent)
[group('setup')]
setup-gate:
    scripts/setup/install.sh {{ venv }} gate

# rewrite every Python lock (dev, gate, image wheelhouse, scanners) with the pinned uv, pins and SHA-256 hashes, current pins kept; ARGS go to uv pip compile (e.g. --upgrade-package NAME)
[group('setup')]
lock *ARGS: setup
    scripts/setup/lock.sh {{ ARGS }}

# rewrite scripts/image/rootfs.lock: every Debian package of the image by name, version, architecture and SHA-256, resolved from scripts/image/rootfs-packages.txt against the Debian sources of the day, the .debs cached by hash (as root)
[group('setup')]
lock-debian: setup
    PYTHON={{ py }} scripts/image/lock-debian.sh

# install the pinned Debian packages the image build and the test node need (idempotent)
[group('setup')]
system:
    scripts/system/install-debian.sh

# build kube-apiserver, etcd and helm from the pinned Go modules into the cache (idempotent; the first build takes ~20 min)
[group('setup')]
testenv-build:
    scripts/testenv/build.sh >&2

# build kube-apiserver of every extra minor of the compatibility tier (scripts/testenv/apiserver-1.N/) into the cache, one after another, after testenv-build (idempotent; a few minutes per minor the first time)
[group('setup')]
testenv-apiservers-build: testenv-build
    scripts/testenv/build-apiservers.sh >&2

# build the test node's binaries (kubelet, kube-proxy, CoreDNS...) and pause image into the cache (idempotent)
[group('setup')]
testenv-node-build:
    scripts/testenv/build-node.sh

# build opa and conftest from the pinned Go modules into the cache (idempotent; the first build takes ~10 min)
[group('setup')]
policy-tools-build:
    scripts/testenv/build-policy-tools.sh >&2

# build the S3-compatible test server (SeaweedFS `weed`) from the pinned Go module into the cache (idempotent; the first build takes ~20 min)
[group('setup')]
s3-build:
    scripts/testenv/build-s3.sh >&2

# build promtool and the dashboard linter from the pinned Go modules into the cache (idempotent; the first build takes ~8 min)
[group('setup')]
monitoring-tools-build:
    scripts/testenv/build-monitoring-tools.sh >&2

# build kube-network-policies (the NetworkPolicy enforcer of the test node) from its pinned Go module into the cache (idempotent; the first build takes ~15 min)
[group('setup')]
network-policies-build:
    scripts/testenv/build-network-policies.sh >&2

# build the test OCI registry and the release's registry client (go-containerregistry's crane) from the pinned Go module into the cache (idempotent; the first build takes ~1 min)
[group('setup')]
registry-build:
    scripts/testenv/build-registry.sh >&2

# build the release's signing tool (cosign) from the pinned Go module into the cache (idempotent; the first build takes ~15 min)
[group('setup')]
cosign-build:
    scripts/testenv/build-cosign.sh >&2

# build the release's SBOM generator (syft) from its pinned Go module and install the SBOM checker (ntia-conformance-checker) from its hashed lock into the cache (idempotent; the first build takes ~20 min)
[group('setup')]
sbom-tools-build:
    scripts/testenv/build-sbom-tools.sh >&2

# install the manifest scanners the render tests run (checkov in a virtualenv of its own, kube-score from its pinned Go module) into the cache (idempotent; the first install takes ~3 min)
[group('setup')]
scanners-build:
    scripts/testenv/build-scanners.sh >&2

# the full gate: Debian packages, setup, builds (two side by side), lint, types, formatting, generated files, OPA policies, all tests in lanes side by side held to their budget (node tier included); ends with the time of every step and test tier on stderr
[group('check')]
check:
    JUST="{{ just_executable() }}" scripts/check.sh

# ruff lint and yamllint on the chart
[group('check')]
lint: setup
    {{ bin }}/ruff check src tests scripts
    {{ bin }}/yamllint --strict -c .yamllint.yaml {{ chart }}/Chart.yaml {{ chart }}/values.yaml ci

# mypy strict on src/
[group('check')]
typecheck: setup
    {{ bin }}/mypy

# check formatting of Python and of this justfile
[group('check')]
fmt-check: setup
    {{ bin }}/ruff format --check src tests scripts
    {{ bin }}/just --fmt --check --unstable

# regenerate generated files, then fail if that changed anything
[group('check')]
gen-check: gen
    git diff --exit-code -- {{ chart }}/values.schema.json {{ chart }}/README.md docs/rbac.md README.md \
      policy/fixtures_test.rego src/checkpoint_gate/policy.wasm

# format Python and this justfile
[group('fmt')]
fmt: setup
    {{ bin }}/ruff format src tests scripts
    {{ bin }}/ruff check --fix src tests scripts
    {{ bin }}/just --fmt --unstable

# regenerate values.schema.json, the values.yaml key comments, docs/rbac.md, the README values table, the Rego fixtures and policy.wasm
[group('gen')]
gen: setup policy-tools-build
    {{ py }} scripts/gen.py

# the policies under OPA: opa fmt and opa check --strict clean, unit tests by conftest verify, every non-test line covered
[group('check')]
policy-check: setup policy-tools-build
    #!/usr/bin/env bash
    set -euo pipefail
    tools=$(scripts/testenv/build-policy-tools.sh | tail -1)
    rego=(policy src/checkpoint_gate/entrypoint.rego)
    "$tools/opa" fmt --list --fail "${rego[@]}"
    "$tools/opa" check --strict "${rego[@]}"
    "$tools/conftest" verify --no-color --policy policy
    "$tools/opa" test --coverage policy | {{ py }} scripts/policy_coverage.py

# build the container image offline (Debian packages + a wheelhouse + buildah); prints the archive path last
[group('build')]
image:
    scripts/image/build.sh

# build the gate image offline (`checkpoint-runtime gate` as entrypoint, for CI jobs); prints the archive path last
[group('build')]
gate-image:
    scripts/image/build-gate.sh

# run every test (unit, render, real API server); ARGS go to pytest
[group('test')]
test *ARGS: setup testenv-build
    {{ bin }}/pytest {{ ARGS }}

# run every test in lanes side by side (tests/lanes.toml), failing past the test step's budget; ARGS go to every lane's pytest
[group('test')]
test-lanes *ARGS: setup testenv-build
    {{ py }} -m checkpoint_testenv.lanes {{ ARGS }}

# render the chart with the defaults (or -f FILE / --set ...) in-process, as the gate does: only YAML goes to stdout, the gate's verdict to stderr (exit 1 on a deny)
[group('render')]
[positional-arguments]
render *ARGS: setup-gate
    cd "{{ invocation_directory() }}" && "{{ bin }}/checkpoint-runtime" gate --release checkpoint-runtime \
      -q --output - "$@"

# run the render gate on values files: render, validate, evaluate policies (e.g. just gate -f my-values.yaml)
[group('render')]
[positional-arguments]
gate *ARGS: setup-gate
    cd "{{ invocation_directory() }}" && "{{ bin }}/checkpoint-runtime" gate "$@"

# run checkov and kube-score over the chart rendered with your values (-f FILE / --set ...) or --matrix; lists every exception with its reason, fails on anything unexplained
[group('render')]
[positional-arguments]
scan *ARGS: setup testenv-build scanners-build
    cd "{{ invocation_directory() }}" && "{{ py }}" "{{ justfile_directory() }}/scripts/scan.py" "$@"

# build the wheel into dist/ with pip (no dev tools needed); the last line printed is that folder
[group('build')]
dist:
    scripts/dist.sh

# benchmark: the in-process render gate against helm template + conftest test, interleaved
[group('bench')]
bench-render: setup testenv-build policy-tools-build
    PYTHONPATH=scripts {{ py }} -m bench.render

# benchmark: shard sizes of the reference configurations beside the old design's figures
[group('bench')]
bench-store: setup
    PYTHONPATH=scripts {{ py }} -m bench.store

# benchmark: object-store scan throughput (objects/s listed and checkpointed) on the real S3 server, beside a local folder
[group('bench')]
bench-s3: setup s3-build
    PYTHONPATH=scripts {{ py }} -m bench.objectstore_s3

# benchmark: ingestion throughput of one replica (objects/s from SeaweedFS through the object-store collector, flow-log windows/s, with 1, 10 and 100 collectors) beside a bare loop of the same client; writes its section of docs/benchmarks.md
[group('bench')]
bench-ingest: setup testenv-build s3-build
    PYTHONPATH=scripts {{ py }} -m bench.ingest --write-doc

# benchmark: 3 replicas of one release sharing six leadership buckets against one bucket (each process's CPU share and objects/s, saturated); writes its section of docs/benchmarks.md
[group('bench')]
bench-buckets: setup testenv-build
    PYTHONPATH=scripts {{ py }} -m bench.buckets --write-doc

# every benchmark: writes docs/benchmarks.md and its PNG plots (CI does not run this)
[group('bench')]
bench: setup testenv-build policy-tools-build
    PYTHONPATH=scripts {{ py }} -m bench.all

# the bounded reliability soak (races, Lease recreation, faults, outages, crashes, load) against the real API server
[group('test')]
soak *ARGS: setup testenv-build
    {{ py }} scripts/soak.py {{ ARGS }}

# build the release into dist/release/VERSION from a clean tree: the chart package (the image pinned by digest), the image as an OCI archive, its SBOM (SPDX, CycloneDX), cosign signatures, SHA256SUMS; ends with a table (name, size, digest); --push REGISTRY also pushes the image and the chart and signs them there; ARGS go to scripts/release/release.py (--help)
[group('release')]
[positional-arguments]
release *ARGS: setup testenv-build registry-build cosign-build sbom-tools-build
    {{ py }} scripts/release/release.py "$@"

# the main job: gate the chart's defaults, install it on a real single-node cluster, checkpoint, fail over
[group('demo')]
demo *ARGS: setup testenv-build testenv-node-build image
    {{ bin }}/checkpoint-runtime gate
    {{ py }} scripts/demo.py {{ ARGS }}
