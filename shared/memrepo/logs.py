"""Structured JSON logs in the format Cloud Logging reads from stdout.

Only entry points call :func:`configure`; library modules use ``logging.getLogger(__name__)``.
Each line is one JSON object with ``severity``, ``message``, ``logger`` and the record's extra
fields (``user_id``, ``session_id``, timings ...). See
https://cloud.google.com/logging/docs/structured-logging. No transcript text is logged.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

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
