"""The one home of every constant the format, the store and the chart agree on."""

from typing import Final

# the API server sums len(value) over data and binaryData (decoded bytes) and rejects
# more than MaxSecretSize (k8s.io/api core/v1 types.go). Keys and metadata do not count.
CONFIGMAP_VALUE_LIMIT: Final = 1_048_576

# an envelope that decodes to more than this is rejected; the encoder refuses to make one.
# A shard's members (head and every chunk) inflate to at most this many bytes together.
MAX_DECODED_ENVELOPE: Final = 128 * 1024 * 1024
# a row-block base (v3 encoding `rowblock-1`) expands to at most this many characters of rows
# (keys and values) over the whole shard; the encoder refuses more. Its members store ids
# decoded and shared prefixes once, so a uuid seen row is ~162 characters from ~76 payload
# bytes: the rows, not the payload, reach a bound first. Twice the envelope bound admits
# 1.5 million such rows (the rows of a million take ~300 MB of memory once decoded).
MAX_DECODED_ROW_CHARS: Final = 2 * MAX_DECODED_ENVELOPE

# the shard format written, every format ever written (all stay readable), and the single
# binaryData entry.
SHARD_FORMAT: Final = "gzip-shards-v3"
SHARD_FORMAT_V2: Final = "gzip-shards-v2"
SHARD_FORMAT_V1: Final = "gzip-shards-v1"
SHARD_FORMATS: Final = (SHARD_FORMAT_V1, SHARD_FORMAT_V2, SHARD_FORMAT)
SHARD_DATA_KEY: Final = "checkpoint.json.gz"
# the base encoding a v3 head names (its `encoding` field): the inline base and every chunk are
# row blocks (format/rowblock.py). A head without the field is v3 as first written: its base
# members hold the JSON column layout (still read; rewritten at the shard's next persist).
BASE_ENCODING: Final = "rowblock-1"

# the old release's single-ConfigMap format.
LEGACY_DATA_KEY: Final = "checkpoints.json"

# labels select a store's shards for discovery; annotations carry what labels cannot.
LABEL_PREFIX: Final = "checkpoint-runtime.io"
LABEL_COMPONENT: Final = f"{LABEL_PREFIX}/component"
LABEL_STORE: Final = f"{LABEL_PREFIX}/store"
COMPONENT_SHARD: Final = "checkpoint-shard"
# a v3 shard's chunk slots: the shard's labels with this component instead.
COMPONENT_CHUNK: Final = "checkpoint-chunk"
# the store's Lease: the store label with this component (set when the runtime creates the
# Lease or takes it over; a Lease created by an earlier release carries none).
COMPONENT_LEASE: Final = "checkpoint-lease"

ANNOTATION_SHARD_KEY: Final = f"{LABEL_PREFIX}/shard-key"
ANNOTATION_FORMAT: Final = f"{LABEL_PREFIX}/format"
ANNOTATION_RAW_BYTES: Final = f"{LABEL_PREFIX}/raw-bytes"
ANNOTATION_COMPRESSED_BYTES: Final = f"{LABEL_PREFIX}/compressed-bytes"
ANNOTATION_ROWS: Final = f"{LABEL_PREFIX}/rows"
ANNOTATION_WRITER: Final = f"{LABEL_PREFIX}/writer"
ANNOTATION_EPOCH: Final = f"{LABEL_PREFIX}/epoch"
# the uid of the Lease object whose leader wrote the shard (epochs of different Lease objects of
# one name are not comparable: a recreated Lease restarts its transitions at 0).
ANNOTATION_LEASE_UID: Final = f"{LABEL_PREFIX}/lease-uid"
# on the Lease: added to leaseTransitions to give the leadership epoch; only raised.
ANNOTATION_EPOCH_BASE: Final = f"{LABEL_PREFIX}/epoch-base"
ANNOTATION_WRITE_ID: Final = f"{LABEL_PREFIX}/write-id"
# on the Lease: the store key (STORE_KEY_BYTES random bytes, unpadded base64url) that seals the
# heads; on every head: its seal, `<SEAL_PREFIX>:<hex HMAC-SHA256>` (store/seal.py).
ANNOTATION_STORE_KEY: Final = f"{LABEL_PREFIX}/store-key"
ANNOTATION_SEAL: Final = f"{LABEL_PREFIX}/seal"
SEAL_PREFIX: Final = "hmac-sha256-v1"
STORE_KEY_BYTES: Final = 32
# the ConfigMap `run` asks, in a dry run, to create to prove the store's admission policy is
# enforced: `<lease name>` + this suffix, none of the store's object names.
ADMISSION_PROBE_SUFFIX: Final = "-admission-probe"
# on a v3 chunk slot: which slot of its shard it is (`a0`, `b3`, ...).
# on the store's Lease (the release's own, named store.leaseName): the bucket layout the store's
# replicas lead under (runtime config store.buckets; absent = 1). A replica configured with
# another number of buckets leads none (election/buckets.py).
ANNOTATION_BUCKETS: Final = f"{LABEL_PREFIX}/buckets"
# leadership buckets: at most this many per store (two-digit Lease name suffixes, a Role of
# 1 + 2 x this many Lease names).
MAX_BUCKETS: Final = 32
ANNOTATION_SLOT: Final = f"{LABEL_PREFIX}/slot"
ANNOTATION_LEGACY_DIGEST: Final = f"{LABEL_PREFIX}/legacy-digest"
ANNOTATION_MIGRATED: Final = f"{LABEL_PREFIX}/migrated"
# beside it: the stores (Lease names, comma-separated) that took over the marked legacy value
ANNOTATION_MIGRATED_BY: Final = f"{LABEL_PREFIX}/migrated-by"

# one shared deadline covers a whole open, batch, debounced persist or flush.
DEFAULT_DEADLINE_SECONDS: Final = 30.0
DEFAULT_DEBOUNCE_SECONDS: Final = 1.0
DEFAULT_MAX_SEEN_KEYS: Final = 5000
# a persist of several dirty shards sends this many writes at once at most (they are API
# calls, I/O bound; one shard's writes are always serialised).
PERSIST_CONCURRENCY: Final = 4

# client-go leader election defaults.
LEASE_DURATION_SECONDS: Final = 15.0
RENEW_DEADLINE_SECONDS: Final = 10.0
RETRY_PERIOD_SECONDS: Final = 2.0
# the longest leaseDurationSeconds the chart renders (values schema maximum): a Lease of the
# store's name held for longer than this (and than the runtime's own configured duration) was
# not written by one of its replicas.
LEASE_DURATION_MAX_SECONDS: Final = 300

# how the kubernetes backend finds a store's shards on open (runtime config store.discovery):
# list them by label, or get each configured collector's shard by name (a name-pinned Role).
DISCOVERY_LABELS: Final = "labels"
DISCOVERY_NAMES: Final = "names"

# what discovery needs besides the keys above.
ANNOTATION_LEASE: Final = f"{LABEL_PREFIX}/lease"
SHARD_NAME_HASH_CHARS: Final = 16
STORE_LABEL_HASH_CHARS: Final = 16
MAX_DNS_SUBDOMAIN: Final = 253

# the legacy object carries this annotation (value: the digest that was migrated) once every
# shard is durable; "sha256:" prefixes every digest the store records.
DIGEST_PREFIX: Final = "sha256:"

# gzip effort of the v1 writer (zlib) and the baseline; 9 is zlib's smallest output.
GZIP_LEVEL: Final = 9
# libdeflate level of the v2 writer (measured on the v2 envelope: 0.9 of zlib 9's bytes at a
# third of its time; level 6 is faster still but 6 % larger, 12 smaller but 5x slower;
# scripts/bench/codec.py).
FAST_DEFLATE_LEVEL: Final = 9
# libdeflate level of v2 delta members, written at every persist (measured on an 800-row
# delta: level 6 a fifth of level 9's time for 1-20 % more bytes).
DELTA_DEFLATE_LEVEL: Final = 6
# compressed v3 head members kept for reuse (a head's member changes only at a compaction;
# one entry per shard's current head, a few hundred bytes each).
HEAD_MEMBER_CACHE: Final = 1024
# a v2 column is cut into runs sharing a prefix; the prefix length is the longest that keeps
# this many entries a run on average (measured on both workloads: smallest output; fewer runs
# decode faster, more runs remove more shared characters).
MEAN_RUN_ENTRIES: Final = 6
# a shard's delta member may grow to this fraction of its base member (compressed bytes)
# before the next persist writes a new base instead (compaction); a Store option.
DEFAULT_COMPACTION_RATIO: Final = 0.5

# the old design's measured shard figures (total bytes, largest shard bytes) per configuration.
OLD_DESIGN_FIGURES: Final = {
    "one-feed": (15_846, 15_846),
    "three-feeds": (47_381, 15_847),
    "three-tailnets": (143_519, 16_302),
}

# client-go's JitterFactor: candidates wait retry x (1 + rand x 1.2); renew deadline must
# exceed retry x 1.2.
LEADER_ELECTION_JITTER_FACTOR: Final = 1.2

# Collectors: defaults of schemas/runtime-config.schema.json, and how many
# objects one synchronous checkpoint batch covers (the most a crash can repeat).
DEFAULT_POLL_SECONDS: Final = 10.0
DEFAULT_REPLAY_WINDOW_SECONDS: Final = 300.0
OBJECTSTORE_CHUNK_OBJECTS: Final = 100
# GETs in flight while a chunk of a remote (s3://) feed is read.
OBJECTSTORE_READ_THREADS: Final = 16
# URL schemes an objectstore collector reads (the schemas' objectstoreUrl pattern), and the
# package extra each needs beyond the base install ("" for none).
OBJECTSTORE_URL_EXTRAS: Final = {"file": "", "s3": "s3"}
# s3:// requests: fail a poll fast (the runner retries it with backoff) rather than hang in
# botocore's 60 s defaults; a few attempts inside one poll ride out a dropped connection.
S3_CONNECT_TIMEOUT_SECONDS: Final = 5.0
S3_READ_TIMEOUT_SECONDS: Final = 30.0
S3_MAX_ATTEMPTS: Final = 3
# After consecutive source failures a collector waits pollSeconds x 2^(failures-1), at most this
# long (or pollSeconds, if that is longer), before it polls again.
COLLECTOR_BACKOFF_MAX_SECONDS: Final = 300.0
FLOWLOGS_REQUEST_TIMEOUT_SECONDS: Final = 10.0

# Runtime process: HTTP port, file-store defaults when no config is given,
# and the client-go healthz tolerance past an unrenewed lease.
DEFAULT_HTTP_PORT: Final = 8080
DEFAULT_HTTP_BIND: Final = "0.0.0.0"
DEFAULT_FILE_STORE_PATH: Final = "/tmp/checkpoints"
DEFAULT_STORE_NAME: Final = "checkpoint-runtime"
LEADER_HEALTH_TOLERANCE_SECONDS: Final = 20.0
RUNTIME_CONFIG_SCHEMA: Final = "runtime-config.schema.json"

# the startup projection encodes at most this many seen rows per shard and
# scales linearly beyond (compressed size grows linearly in rows); the representative workload
# is the high-entropy UUID shape, the conservative one.
PROJECTION_MAX_ENCODED_ROWS: Final = 10_000
# the projection's advice (`project` MAX_ROWS, the refusal's "at most N") leaves this fraction
# of the ConfigMap limit free
PROJECTION_ADVICE_HEADROOM: Final = 0.05
PROJECTION_SHAPE: Final = "uuid"
PROJECTION_GAP_ROWS: Final = 16
# reference-shard sizes of the projection are kept between processes in the user's cache
# (usercache: $XDG_CACHE_HOME/checkpoint-runtime/<kind>), keyed by the format code that made them.
USER_CACHE_ENV: Final = "XDG_CACHE_HOME"
USER_CACHE_FOLDER: Final = "checkpoint-runtime"
PROJECTION_CACHE_KIND: Final = "projection-v1"
# the memory projection (runtime/projection.py): the peak resident memory of the runtime process
# at its configured bounds, from figures measured with `PYTHONPATH=scripts python -m bench.memory`
# (VmRSS/VmHWM of a fresh process that opens a file store of N uuid seen rows at maxChunks 32, then
# rewrites that shard whole through the production encoder three times, or polls its feed at
# capacity; N = 50,000, 200,000 and 1,000,000): the largest figure per row over those sizes,
# rounded up.
# resident bytes of one decoded row (its key and value strings and its entry in the shard's dict);
# measured 367 / 357 / 357 bytes a row (tracemalloc counts 288 of them)
MEMORY_DECODED_BYTES_PER_ROW: Final = 400
# what a compaction that rewrites a shard whole adds while it runs, per row of that shard (the
# snapshot copy, the partition, the inline attempt and the chunks' encoders); measured
# 478 / 548 / 547 (tracemalloc's peak: 485)
MEMORY_COMPACTION_BYTES_PER_ROW: Final = 600
# what one poll of a feed at capacity adds while it runs, per row of its shard (the copy of its
# seen-set, the eviction's sort of it by object name, its batch's persist); measured
# 652 / 699 / 633 (tracemalloc's peak: 537)
MEMORY_POLL_BYTES_PER_ROW: Final = 750
# the process without rows: VmHWM of `checkpoint-runtime run` with the file store and a file://
# feed, 39 MB; with the kubernetes backend imported and an S3 client that has made a request,
# 83 MB; rounded up to 96 MiB.
MEMORY_BASELINE_BYTES: Final = 96 * 1_048_576
# where the container's memory limit is read at startup: cgroup v2 `memory.max` ("max":
# unlimited), v1 `memory/memory.limit_in_bytes` (unlimited is a page-rounded 2**63 - 1, so
# anything from CGROUP_UNLIMITED_BYTES up is no limit); the process's own cgroup (its path in
# /proc/self/cgroup) when visible there, else the mount's root (a container's own namespace).
CGROUP_ROOT: Final = "/sys/fs/cgroup"
CGROUP_SELF: Final = "/proc/self/cgroup"
CGROUP_UNLIMITED_BYTES: Final = 2**62
# the gate's policy module compiled by wasmtime (serialized), keyed by the module's digest and
# the wasmtime version
POLICY_CACHE_KIND: Final = "policy-wasm-v1"

# ids are stored base64-decoded only when that shrinks their compressed column
# to at most this fraction: decoding has to re-encode every such id, which costs time (measured:
# at gzip level 6, UUID names 0.80-0.84, sequential names 0.91-0.94 of the plain column).
BASE64_DECODED_MAX_FRACTION: Final = 0.88
BASE64_TRIAL_ROWS: Final = 1000  # rows of a group the decision is measured on

# a front-coded column gets one uniform prefix length when the per-entry
# prefixes would share at most this many characters more per entry on average (measured: UUID
# names in time order share ~0.1 more; sequential names and sorted timestamps share many more).
UNIFORM_PREFIX_SLACK: Final = 0.5

# etcd past its space quota refuses every write before applying it; the API server answers 500
# with this message (measured on the test API server). A definitive "not committed".
ETCD_NOSPACE_MESSAGE: Final = "etcdserver: mvcc: database space exceeded"
# after such a refusal a store sends no write for this long, doubling after each further
# refusal up to the maximum; then one write probes whether space was freed. At most one write
# per hold-off reaches a full etcd, and a store notices within a minute that it was repaired.
ETCD_SPACE_FIRST_HOLD_SECONDS: Final = 5.0
ETCD_SPACE_MAX_HOLD_SECONDS: Final = 60.0
# the gauge (1 while stopped); its counter of refusals is exported as `<name>_total`.
METRIC_ETCD_SPACE_EXCEEDED: Final = "checkpoint_store_etcd_space_exceeded"

# gzip-shards-v3: a head object (the commit point) and chunk slots `<head>-c<generation><index>`,
# two generations per index; `maxChunks` slots per generation (chart checkpoint.store.maxChunks).
CHUNK_GENERATIONS: Final = ("a", "b")
DEFAULT_MAX_CHUNKS: Final = 8
MAX_CHUNKS_LIMIT: Final = 256
# a base whose compressed bytes stay at or under this lives in the head itself (one object per
# collector namespace); above it, in chunk slots. Measured: the largest stock shard (old-design
# workload, 5000 seen rows) is 27.2 KB; every head write costs etcd the head's whole size, so the
# inline base is what a 1-row persist of a small shard costs (docs/store.md, "Choosing the
# thresholds"). A chunked shard goes back inline once its base falls to half of this.
INLINE_BASE_MAX_BYTES: Final = 32 * 1024
# a chunked base is cut into as many hash partitions as keep each chunk near this many
# compressed bytes (at most maxChunks; a chunk may then grow to the ConfigMap limit): a
# compaction rewrites only the chunks whose rows changed, so this bounds its cost per chunk.
CHUNK_TARGET_BYTES: Final = 128 * 1024
# the head's delta member may grow to this many compressed bytes (or compaction_ratio of the
# base, whichever is smaller) before the next persist compacts it into the base.
HEAD_DELTA_MAX_BYTES: Final = 16 * 1024
# the store's write budget: bytes of shard objects (values, annotations, and
# WRITE_OBJECT_OVERHEAD_BYTES each) sent to the API per second, kept by stretching the debounce
# of the busiest shards (chart checkpoint.store.writeBudgetBytesPerSecond).
DEFAULT_WRITE_BUDGET_BYTES_PER_SECOND: Final = 262_144
# the budget is measured over this sliding window (seconds).
WRITE_BUDGET_WINDOW_SECONDS: Final = 10.0
# what one object write costs the budget beyond its value and annotations: its name, labels and
# the metadata the API server adds, and etcd's framing (measured: ~1.9 KB of etcd WAL per write
# beyond the value, annotations included; see docs/benchmarks.md).
WRITE_OBJECT_OVERHEAD_BYTES: Final = 1_536
# before a shard has written a delta, the budget's estimate takes a changed row to cost this
# many times a row of its base (measured on uuid rows: ~60 bytes in a delta, ~29 in the base).
DELTA_ROW_BYTES_FACTOR: Final = 2.0
# a chunk slot whose read disagrees with the manifest while the head changed is read again
# with backoff (a compaction committed meanwhile) this many times at most, inside the deadline.
CHUNK_REREAD_ATTEMPTS: Final = 8
# the etcd space quota an operator declares (chart checkpoint.store.etcdQuotaBytes): etcd's default.
# `project` and the gate report the worst-case bytes one release writes per compaction window
# against it, and warn past ETCD_QUOTA_WARN_FRACTION.
DEFAULT_ETCD_QUOTA_BYTES: Final = 2 * 1024**3
# the projection of a chunked shard: its rows spread over maxChunks slots by a hash of the row
# key, so the fullest slot holds up to this many standard deviations more rows than the mean
# (n/k + 4 sqrt(n/k); the fullest of 256 slots exceeds 3 sigma now and then, 4 almost never).
PROJECTION_CHUNK_SKEW_SIGMAS: Final = 4.0
# the API server compacts etcd every 5 minutes by default (--etcd-compaction-interval), to the
# revision it noted at the tick before: up to two intervals of history are kept. `project` and
# the gate report the most bytes one store may write in that window against the etcd quota.
API_SERVER_COMPACTION_INTERVAL_SECONDS: Final = 300
COMPACTION_WINDOW_SECONDS: Final = 2 * API_SERVER_COMPACTION_INTERVAL_SECONDS
# warn when one release could fill this fraction of the declared etcd quota in one window: etcd
# also holds the rest of the cluster, and several releases may share it.
ETCD_QUOTA_WARN_FRACTION: Final = 0.25

# Bounds on untrusted input (config files, values files, --set, kubeconfigs), checked before
# anything expensive runs (a schema, a render, a projection). Helm's YAML library (go-yaml)
# refuses aliasing only past 100 aliases and a ratio that still admits ~400,000 alias-driven
# decodes; these bounds are absolute and far below that.
MAX_INPUT_FILE_BYTES: Final = 1_048_576
MAX_YAML_ALIASES: Final = 100
MAX_EXPANDED_NODES: Final = 100_000  # scalars + collections once every alias is expanded
MAX_NESTING_DEPTH: Final = 64
MAX_STRING_CHARS: Final = 65_536
MAX_KEY_CHARS: Final = 1_024
MAX_ITEMS: Final = 10_000  # entries of one list or map
MAX_COLLECTORS: Final = 64
# Floors and ceilings that reflect reality (mirrored in both schemas).
MIN_POLL_SECONDS: Final = 0.1
MAX_POLL_SECONDS: Final = 86_400.0
MIN_DEADLINE_SECONDS: Final = 0.1
MAX_DEADLINE_SECONDS: Final = 600.0
# Helm refuses a release name longer than this (its DNS-1123 label limit leaves room for suffixes).
MAX_RELEASE_NAME: Final = 53
