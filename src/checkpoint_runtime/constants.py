"""The one home of every constant the format, the store and the chart agree on."""

from typing import Final

# §6: the API server sums len(value) over data and binaryData (decoded bytes) and rejects
# more than MaxSecretSize (k8s.io/api core/v1 types.go). Keys and metadata do not count.
CONFIGMAP_VALUE_LIMIT: Final = 1_048_576

# §4: an envelope that decodes to more than this is rejected; the encoder refuses to make one.
MAX_DECODED_ENVELOPE: Final = 128 * 1024 * 1024

# §4: the shard format and its single binaryData entry.
SHARD_FORMAT: Final = "gzip-shards-v1"
SHARD_DATA_KEY: Final = "checkpoint.json.gz"

# §8: the old release's single-ConfigMap format.
LEGACY_FORMAT: Final = "legacy-json-v1"
LEGACY_DATA_KEY: Final = "checkpoints.json"

# §5: labels select a store's shards for discovery; annotations carry what labels cannot.
LABEL_PREFIX: Final = "checkpoint-runtime.io"
LABEL_COMPONENT: Final = f"{LABEL_PREFIX}/component"
LABEL_STORE: Final = f"{LABEL_PREFIX}/store"
COMPONENT_SHARD: Final = "checkpoint-shard"

ANNOTATION_SHARD_KEY: Final = f"{LABEL_PREFIX}/shard-key"
ANNOTATION_FORMAT: Final = f"{LABEL_PREFIX}/format"
ANNOTATION_RAW_BYTES: Final = f"{LABEL_PREFIX}/raw-bytes"
ANNOTATION_COMPRESSED_BYTES: Final = f"{LABEL_PREFIX}/compressed-bytes"
ANNOTATION_ROWS: Final = f"{LABEL_PREFIX}/rows"
ANNOTATION_WRITER: Final = f"{LABEL_PREFIX}/writer"
ANNOTATION_EPOCH: Final = f"{LABEL_PREFIX}/epoch"
ANNOTATION_WRITE_ID: Final = f"{LABEL_PREFIX}/write-id"
ANNOTATION_LEGACY_DIGEST: Final = f"{LABEL_PREFIX}/legacy-digest"
ANNOTATION_MIGRATED: Final = f"{LABEL_PREFIX}/migrated"

# §2: one shared deadline covers a whole open, batch, debounced persist or flush.
DEFAULT_DEADLINE_SECONDS: Final = 30.0
DEFAULT_DEBOUNCE_SECONDS: Final = 1.0
DEFAULT_MAX_SEEN_KEYS: Final = 5000

# §7: client-go leader election defaults.
LEASE_DURATION_SECONDS: Final = 15.0
RENEW_DEADLINE_SECONDS: Final = 10.0
RETRY_PERIOD_SECONDS: Final = 2.0
