"""Structured JSON logs in the format Cloud Logging reads from stdout.

Only entry points call :func:`configure`; library modules use ``logging.getLogger(__name__)``.
Each line is one JSON object with ``severity``, ``message``, ``logger`` and the record's extra
fields (``user_id``, ``session_id``, timings ...). See
https://cloud.google.com/logging/docs/structured-logging. No transcript text is logged.

Request-scoped fields: an entry point wraps its work in ``with bind(**fields):`` and every record
logged inside (by any module, same thread or task) carries them; the retrieval function binds the
trace of the request (:func:`trace_fields`: ``logging.googleapis.com/trace``, ``spanId`` and
``trace_sampled`` from ``traceparent`` or ``X-Cloud-Trace-Context``), so Cloud Logging groups a
request's lines under its trace.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

TRACE = "logging.googleapis.com/trace"
SPAN_ID = "logging.googleapis.com/spanId"
TRACE_SAMPLED = "logging.googleapis.com/trace_sampled"

_BOUND: ContextVar[dict[str, Any]] = ContextVar("memrepo_log_fields", default={})  # noqa: B039
_TRACEPARENT = re.compile(r"^[0-9a-f]{2}-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_CLOUD_TRACE = re.compile(r"^([0-9a-fA-F]{32})(?:/(\d+))?(?:;o=([01]))?$")


@contextmanager
def bind(**fields: Any) -> Iterator[None]:
    """Add ``fields`` (``None`` values skipped) to every record logged inside the block."""
    token = _BOUND.set({**_BOUND.get(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _BOUND.reset(token)


def trace_fields(headers: Mapping[str, str], project: str | None) -> dict[str, Any]:
    """Return Cloud Logging's trace fields for a request's headers (``{}`` without a trace).

    Reads W3C ``traceparent`` (``00-<32 hex trace>-<16 hex span>-<flags>``) first, then
    ``X-Cloud-Trace-Context`` (``<32 hex trace>/<decimal span>;o=<0|1>``). The trace is
    ``projects/<project>/traces/<trace id>``; without a project only ``trace_id`` is given.

    Args:
        headers: the request headers (any case).
        project: the Google Cloud project id, or ``None``.
    """
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    trace = span = None
    sampled: bool | None = None
    if found := _TRACEPARENT.match(lower.get("traceparent", "")):
        trace, span, sampled = found[1], found[2], bool(int(found[3], 16) & 1)
    elif found := _CLOUD_TRACE.match(lower.get("x-cloud-trace-context", "")):
        trace = found[1].lower()
        span = f"{int(found[2]):016x}" if found[2] and int(found[2]) < 2**64 else None
        sampled = found[3] == "1" if found[3] else None
    if trace is None or set(trace) == {"0"}:
        return {}
    fields: dict[str, Any] = {TRACE: f"projects/{project}/traces/{trace}"} if project else {
        "trace_id": trace}
    if span:
        fields[SPAN_ID] = span
    if sampled is not None:
        fields[TRACE_SAMPLED] = sampled
    return fields

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class CloudLoggingFormatter(logging.Formatter):
    """Format a record as one JSON line for Cloud Logging."""

    def format(self, record: logging.LogRecord) -> str:
        """Return the JSON line of ``record``."""
        entry: dict[str, Any] = {
            "severity": record.levelname if record.levelname != "WARN" else "WARNING",
            "message": record.getMessage(),
            "logger": record.name,
        }
        entry.update(_BOUND.get())
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["stack_trace"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure(level: int = logging.INFO) -> None:
    """Send the root logger's records to stdout as Cloud Logging JSON (idempotent)."""
    root = logging.getLogger()
    if any(isinstance(h.formatter, CloudLoggingFormatter) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(CloudLoggingFormatter())
    root.addHandler(handler)
    root.setLevel(level)
