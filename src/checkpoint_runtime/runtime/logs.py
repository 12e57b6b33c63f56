"""Structured logs: one JSON object per line on stderr (stdout may be the records sink)."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any

from checkpoint_runtime.errors import ConfigError, ExitCode, WriteUncertainError, describe, leaves

_STANDARD = set(vars(logging.makeLogRecord({}))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    """`{"ts", "level", "logger", "msg", ...extra}`; extras come from `logger.info(..., extra=)`."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, separators=(",", ":"))


def configure(level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # The kubernetes client and urllib3 log every retry warning; keep their noise down.
    logging.getLogger("urllib3").setLevel(logging.ERROR)


def refused(log: logging.Logger, error: BaseException) -> ExitCode:
    """Log a named error that stopped `run` before it started, as one JSON line whose
    "error" field is the error's name (and "key" the config key, when there is one)."""
    extra: dict[str, Any] = {"error": type(error).__name__}
    message = "; ".join(line.strip() for line in describe(error)).partition(": ")[2]
    if isinstance(error, ConfigError):
        extra["key"] = error.path
        message = f"invalid configuration: {message}"
    log.error("%s", message, extra=extra)
    return ExitCode.ERROR


def lifecycle_ended(log: logging.Logger, errors: Iterable[BaseException]) -> None:
    """One error line per distinct error that ended the lifecycle: the whole group in the
    message, whether a write's outcome is unknown, and every grouped error as a cause."""
    distinct = {"\n".join(describe(error)): error for error in errors}
    for error in distinct.values():
        log.error(
            "lifecycle ended: %s",
            "; ".join(line.strip() for line in describe(error)),
            extra={
                "error": type(error).__name__,
                "write_uncertain": _contains(error, WriteUncertainError),
                "causes": [_cause(leaf) for leaf in leaves(error)],
            },
        )


def _cause(error: BaseException) -> dict[str, Any]:
    """One error of a fatal group as a log field: its name, shard, HTTP status and message."""
    cause: dict[str, Any] = {"error": type(error).__name__, "message": str(error)}
    for field_name in ("shard", "status"):
        value = getattr(error, field_name, None)
        if value is not None:
            cause[field_name] = value
    return cause


def _contains(error: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(error, kind):
        return True
    if isinstance(error, BaseExceptionGroup):
        return any(_contains(inner, kind) for inner in error.exceptions)
    return False
