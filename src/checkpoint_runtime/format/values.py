"""The text forms collectors store in row ids and values: object ids and RFC 3339 timestamps."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def object_id(name: str) -> str:
    """The seen/gap row id of an object name: unpadded base64 (the old design's row shape)."""
    return base64.b64encode(name.encode()).decode().rstrip("=")


def object_name(row_id: str) -> str:
    """Inverse of object_id."""
    padded = row_id + "=" * (-len(row_id) % 4)
    return base64.b64decode(padded, validate=True).decode()


def rfc3339_from_ns(ns: int) -> str:
    """Nanoseconds since the epoch as RFC 3339 UTC with nine fraction digits, the timestamp
    format of every collector row."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    stamp = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{fraction:09d}Z"


def rfc3339_ns(moment: datetime) -> str:
    """`moment` (any timezone) in the collector rows' timestamp format."""
    micros = (moment.astimezone(UTC) - _EPOCH) // _MICROSECOND
    return rfc3339_from_ns(micros * 1000)
