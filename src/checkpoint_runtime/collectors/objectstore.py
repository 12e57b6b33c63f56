"""The object-store feed collector (rows `cursor`, `scan`, `seen/<id>`, `gap/<id>`).

Each poll lists the objects under the feed's prefix (fsspec: local folders built in, `s3://`
through the s3fs extra, paginated, credentials from the environment, an optional endpoint URL for
S3-compatible stores), emits the JSON-lines records of every object it has not seen, and records
what it did in the feed's shard:

- `seen/<id>`: an emitted object (id = unpadded base64 of its name; value = its modification
  time, RFC 3339 ns). Bounded by `maxSeenKeys`: the smallest names are evicted first and the
  scan floor moves up to the largest evicted name, so an evicted object is never re-emitted.
- `scan`: `{"after": floor, "listed": n, "at": time}` of the last pass; names <= floor are done.
- `cursor`: the greatest object name emitted so far.
- `gap/<id>`: an object that was listed but could not be read or parsed; it is skipped and
  reported, never half-emitted. Deleting the row retries it.

A listing that fails (endpoint unreachable, credentials refused, bucket missing) raises a named
SourceError before anything is emitted or written; so does an endpoint that becomes unreachable
while objects are read (those objects are read again on the next poll, not marked as gaps).

Order matters for restarts: records reach the sink and are flushed before the rows that say
they were emitted are persisted (one synchronous batch per chunk of objects), so after a
restart nothing the seen-set covers is emitted again, and a crash repeats at most one chunk.
"""

from __future__ import annotations

import binascii
import gzip
import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from checkpoint_runtime.collectors import CheckpointMap
from checkpoint_runtime.collectors.runner import (
    SourceError,
    SourceUnreachableError,
    source_failure,
)
from checkpoint_runtime.collectors.sink import Sink
from checkpoint_runtime.constants import (
    DEFAULT_MAX_SEEN_KEYS,
    DEFAULT_POLL_SECONDS,
    OBJECTSTORE_CHUNK_OBJECTS,
    OBJECTSTORE_READ_THREADS,
    OBJECTSTORE_URL_EXTRAS,
    S3_CONNECT_TIMEOUT_SECONDS,
    S3_MAX_ATTEMPTS,
    S3_READ_TIMEOUT_SECONDS,
)
from checkpoint_runtime.errors import ConfigError, MissingExtraError
from checkpoint_runtime.format.naming import (
    CURSOR,
    GAP,
    OBJECTSTORE,
    SCAN,
    SEEN,
    collector_namespace,
    name_from_object_id,
    object_id,
    rfc3339_ns,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListedObject:
    name: str
    """Path relative to the feed's prefix."""
    path: str
    """Path the filesystem opens."""
    modified: datetime


def _modified(info: dict[str, Any]) -> datetime:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if isinstance(value, datetime):
            return value if value.tzinfo else value.replace(tzinfo=UTC)
        if isinstance(value, int | float):
            return datetime.fromtimestamp(value, UTC)
    return datetime.now(UTC)


def url_scheme(url: str) -> str:
    return url.split("://", 1)[0] if "://" in url else "file"


def check_url(url: str, key: str = "url") -> None:
    """Refuse, before anything runs, a URL whose scheme is not supported or whose filesystem
    needs an extra that is not installed (fsspec would only say "Please install gcsfs")."""
    scheme = url_scheme(url)
    if scheme not in OBJECTSTORE_URL_EXTRAS:
        supported = ", ".join(f"{name}://" for name in OBJECTSTORE_URL_EXTRAS)
        raise ConfigError(key, f"unsupported URL scheme {scheme}:// (supported: {supported})")
    if not OBJECTSTORE_URL_EXTRAS[scheme]:
        return  # built into fsspec: a config check need not import it
    import fsspec  # imported when used: `run --check-config` on file:// URLs stays fast

    try:
        fsspec.get_filesystem_class(scheme)
    except ImportError:
        raise MissingExtraError(key, f"{scheme}:// URL", OBJECTSTORE_URL_EXTRAS[scheme]) from None


def s3_options(endpoint_url: str | None) -> dict[str, Any]:
    """s3fs options: the endpoint (S3-compatible stores; None: AWS, or $AWS_ENDPOINT_URL),
    short timeouts and a few attempts per request, and no cached listings or instances, so
    every poll sees the bucket as it is. Credentials come from botocore's chain
    ($AWS_ACCESS_KEY_ID/$AWS_SECRET_ACCESS_KEY, web identity, profile files, ...)."""
    options: dict[str, Any] = {
        "skip_instance_cache": True,
        "use_listings_cache": False,
        "config_kwargs": {
            "connect_timeout": S3_CONNECT_TIMEOUT_SECONDS,
            "read_timeout": S3_READ_TIMEOUT_SECONDS,
            "retries": {"max_attempts": S3_MAX_ATTEMPTS, "mode": "standard"},
        },
    }
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    return options


def open_url(url: str, endpoint_url: str | None = None) -> tuple[Any, str]:
    """fsspec's filesystem and root path of `url`, after `check_url`."""
    check_url(url)
    if endpoint_url and url_scheme(url) != "s3":
        raise ConfigError("endpointUrl", "applies only to s3:// URLs")
    options = s3_options(endpoint_url) if url_scheme(url) == "s3" else {}
    import fsspec

    fs, root = fsspec.core.url_to_fs(url, **options)
    return fs, str(root)


class _PollAborted(Exception):
    """The endpoint went away mid-scan: end the poll without marking objects as gaps."""

    def __init__(self, failure: SourceError) -> None:
        super().__init__(str(failure))
        self.failure = failure


class ObjectStoreCollector:
    """One feed: `[<tailnet>/]objectstore/<feed>`."""

    def __init__(
        self,
        store: CheckpointMap,
        sink: Sink,
        *,
        feed: str,
        url: str,
        endpoint_url: str | None = None,
        tailnet: str | None = None,
        max_seen_keys: int = DEFAULT_MAX_SEEN_KEYS,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        chunk_objects: int = OBJECTSTORE_CHUNK_OBJECTS,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        if max_seen_keys < 1:
            raise ConfigError("maxSeenKeys", "must be at least 1")
        self.store = store
        self.sink = sink
        self.feed = feed
        self.tailnet = tailnet
        self.url = url
        self.max_seen_keys = max_seen_keys
        self.poll_seconds = poll_seconds
        self.chunk_objects = max(1, chunk_objects)
        self.namespace = collector_namespace(OBJECTSTORE, tailnet, feed)
        self._now = now or (lambda: datetime.now(UTC))
        self._remote = url_scheme(url) != "file"
        self._fs, self._root = open_url(url, endpoint_url)
        self._root = self._root.rstrip("/")

    # ---- rows --------------------------------------------------------------------------------

    def _key(self, row: str) -> str:
        return f"{self.namespace}/{row}"

    def _ids(self, row_kind: str) -> set[str]:
        prefix = self._key(row_kind) + "/"
        return {key[len(prefix) :] for key, _ in self.store.items(prefix)}

    def floor(self) -> str:
        """Object names <= this are done (the largest name evicted from the seen-set)."""
        raw = self.store.get(self._key(SCAN))
        if not raw:
            return ""
        try:
            after = json.loads(raw).get("after", "")
        except (ValueError, AttributeError):
            log.warning(
                "feed %s: unreadable scan row %r, starting from the seen-set", self.feed, raw
            )
            return ""
        return after if isinstance(after, str) else ""

    # ---- one poll ----------------------------------------------------------------------------

    def list_objects(self) -> list[ListedObject]:
        try:
            if self._remote:
                # No exists() first: on S3 it answers False for refused credentials too.
                self._fs.invalidate_cache()
                found = self._fs.find(self._root, detail=True)
            else:
                found = (
                    self._fs.find(self._root, detail=True) if self._fs.exists(self._root) else {}
                )
        except Exception as error:  # any filesystem's failure is the source's, not the store's
            raise source_failure(f"listing {self.url}", error) from error
        listed = []
        for path, info in found.items():
            if info.get("type", "file") != "file":
                continue
            name = path[len(self._root) :].lstrip("/") if path.startswith(self._root) else path
            listed.append(ListedObject(name, path, _modified(info)))
        return sorted(listed, key=lambda item: item.name)

    def poll(self) -> int:
        objects = self.list_objects()
        done = self._ids(SEEN) | self._ids(GAP)
        floor = self.floor()
        pending = [
            item for item in objects if item.name > floor and object_id(item.name) not in done
        ]
        emitted = 0
        for start in range(0, len(pending), self.chunk_objects):
            try:
                emitted += self._process(pending[start : start + self.chunk_objects], len(objects))
            except _PollAborted as aborted:
                raise aborted.failure from aborted.__cause__
        if not pending:
            self._note_idle_scan(floor, len(objects))
        return emitted

    def _note_idle_scan(self, floor: str, listed: int) -> None:
        """A pass that found nothing new changes no seen row: it is left to the debounced
        persist (set, not batch), and only when the floor or the count changed, so an idle feed
        costs no API writes."""
        try:
            stored = json.loads(self.store.get(self._key(SCAN)) or "{}")
        except ValueError:
            stored = {}
        if stored.get("after") != floor or stored.get("listed") != listed:
            self.store.set(self._key(SCAN), self._scan_value(floor, listed))

    def _fetch(self, chunk: list[ListedObject]) -> list[bytes | Exception | None]:
        """The chunk's objects fetched concurrently from a remote store (one GET per object is
        the cost of a scan); None per object for a local folder, which `_read` opens itself.
        Records are still emitted in name order."""
        if not self._remote:
            return [None] * len(chunk)

        def fetch(item: ListedObject) -> bytes | Exception:
            try:
                return bytes(self._fs.cat_file(item.path))
            except Exception as error:  # handed to _read, which names it
                return error

        with ThreadPoolExecutor(min(OBJECTSTORE_READ_THREADS, len(chunk))) as pool:
            return list(pool.map(fetch, chunk))

    def _process(self, chunk: list[ListedObject], listed: int) -> int:
        changes: dict[str, str | None] = {}
        emitted = 0
        for item, fetched in zip(chunk, self._fetch(chunk), strict=True):
            oid = object_id(item.name)
            try:
                records = self._read(item, fetched)
            except SourceError as error:
                log.warning("feed %s: skipping %s: %s", self.feed, item.name, error)
                changes[self._key(f"{GAP}/{oid}")] = json.dumps(
                    {"object": item.name, "error": str(error), "at": rfc3339_ns(self._now())},
                    separators=(",", ":"),
                )
                continue
            for index, record in enumerate(records):
                self.sink.emit(
                    {
                        "collector": OBJECTSTORE,
                        "tailnet": self.tailnet,
                        "feed": self.feed,
                        "object": item.name,
                        "line": index,
                        "record": record,
                    }
                )
            emitted += len(records)
            changes[self._key(f"{SEEN}/{oid}")] = rfc3339_ns(item.modified)
        cursor = self.store.get(self._key(CURSOR)) or ""
        newest = max((item.name for item in chunk), default="")
        if newest > cursor:
            changes[self._key(CURSOR)] = newest
        # Emitted records are durable before the rows that say so.
        self.sink.flush()
        floor = self._evict(changes)
        self._record_scan(floor, listed, changes)
        return emitted

    def _read(self, item: ListedObject, fetched: bytes | Exception | None = None) -> list[Any]:
        try:
            if isinstance(fetched, Exception):
                raise fetched
            if fetched is None:
                with self._fs.open(item.path, "rb") as handle:
                    data = handle.read()
            else:
                data = fetched
        except Exception as error:  # vanished, unreadable, remote failure
            failure = source_failure(f"reading {item.name}", error)
            if isinstance(failure, SourceUnreachableError):
                raise _PollAborted(failure) from error
            raise SourceError(f"reading: {error}") from error
        if data[:2] == b"\x1f\x8b":
            try:
                data = gzip.decompress(data)
            except (OSError, EOFError) as error:
                raise SourceError(f"bad gzip: {error}") from error
        records = []
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            raise SourceError(f"not UTF-8: {error}") from error
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except ValueError as error:
                raise SourceError(f"line {number} is not JSON: {error}") from error
        return records

    def _evict(self, changes: dict[str, str | None]) -> str:
        """Keep at most max_seen_keys seen rows (after `changes`); return the new floor."""
        seen_prefix = self._key(SEEN) + "/"
        ids = self._ids(SEEN)
        for key, value in changes.items():
            if key.startswith(seen_prefix):
                row_id = key[len(seen_prefix) :]
                if value is None:
                    ids.discard(row_id)
                else:
                    ids.add(row_id)
        floor = self.floor()
        excess = len(ids) - self.max_seen_keys
        if excess > 0:
            by_name = sorted(ids, key=self._name_or_empty)
            for row_id in by_name[:excess]:
                changes[seen_prefix + row_id] = None
                floor = max(floor, self._name_or_empty(row_id))
        return floor

    @staticmethod
    def _name_or_empty(row_id: str) -> str:
        try:
            return name_from_object_id(row_id)
        except (binascii.Error, UnicodeDecodeError, ValueError):
            return ""

    def _scan_value(self, floor: str, listed: int) -> str:
        return json.dumps(
            {"after": floor, "listed": listed, "at": rfc3339_ns(self._now())},
            separators=(",", ":"),
        )

    def _record_scan(self, floor: str, listed: int, changes: dict[str, str | None]) -> None:
        changes[self._key(SCAN)] = self._scan_value(floor, listed)
        self.store.batch(changes)
