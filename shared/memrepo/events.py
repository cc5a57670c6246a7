"""The session-end event: its typed model, its limits, and its content digest.

A ``SessionEnded`` event is the JSON payload a messaging webhook publishes when a conversation
session ends. The Pub/Sub envelope around it is parsed separately (:mod:`memrepo.envelope`).

JSON shape::

    {"user_id": "u-123", "session_id": "2024-05-01-am",
     "occurred_at": "2024-05-01T09:30:00+02:00",
     "turns": [{"speaker": "Ana", "role": "user", "content": "...", "turn_id": "t1"}],
     "metadata": {"channel": "whatsapp"}}

Rules:

* ids: see :mod:`memrepo.ids`.
* ``occurred_at``: ISO 8601. A value with no UTC offset is *assumed UTC* (documented, logged by
  the caller). A value more than :data:`MAX_FUTURE_SKEW` ahead of the writer's clock is refused.
  Dates keep their own offset: the timeline month is the month where the user was.
* ``turns``: 1 to :data:`MAX_TURNS` turns; ``role`` is ``user``, ``assistant`` or ``other``;
  ``speaker`` 1-100 characters without line breaks; content line endings are normalised
  (``\\r\\n`` and ``\\r`` become ``\\n``), everything else (emoji, right-to-left text, text that
  looks like instructions) is kept verbatim as data.
* the transcript (sum of the UTF-8 bytes of every turn's content) is at most
  ``max_transcript_bytes`` (default :data:`DEFAULT_MAX_TRANSCRIPT_BYTES`); larger events are
  refused with :class:`EventTooLarge`, a permanent error.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memrepo.errors import EventTooLarge, InvalidEvent
from memrepo.ids import validate_session_id, validate_user_id

MAX_TURNS = 5_000
DEFAULT_MAX_TRANSCRIPT_BYTES = 1_000_000
MAX_FUTURE_SKEW = timedelta(hours=24)

Role = Literal["user", "assistant", "other"]


class Turn(BaseModel):
    """One utterance of a session."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    speaker: str = Field(min_length=1, max_length=100)
    role: Role
    content: str
    turn_id: str | None = Field(default=None, max_length=64)

    @field_validator("speaker", "turn_id")
    @classmethod
    def _single_line(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = value.strip()
        if not value or any(ch in value for ch in "\r\n\x00") or "**" in value:
            raise ValueError("must be non-empty, on one line, without NUL or '**'")
        return value

    @field_validator("content")
    @classmethod
    def _normalise_newlines(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("content holds a NUL byte")
        return value.replace("\r\n", "\n").replace("\r", "\n")


class SessionEnded(BaseModel):
    """A finished conversation session, the writer's input (see the module docstring)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    user_id: str
    session_id: str
    occurred_at: datetime
    turns: tuple[Turn, ...] = Field(min_length=1, max_length=MAX_TURNS)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("user_id", mode="before")
    @classmethod
    def _user_id(cls, value: object) -> str:
        return validate_user_id(value)

    @field_validator("session_id", mode="before")
    @classmethod
    def _session_id(cls, value: object) -> str:
        return validate_session_id(value)

    @field_validator("occurred_at")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)

    def transcript_bytes(self) -> int:
        """Return the size of the transcript in bytes (UTF-8 of every turn's content)."""
        return sum(len(t.content.encode("utf-8")) for t in self.turns)

    def digest(self) -> str:
        """Return ``sha256:<hex>`` of the session's content (date and turns, not metadata).

        Two deliveries of the same session have the same digest; the same session id with another
        transcript has another digest (a permanent :class:`~memrepo.errors.SessionConflict`).
        """
        canonical = json.dumps(
            {
                "occurred_at": self.occurred_at.isoformat(),
                "turns": [t.model_dump(mode="json") for t in self.turns],
            },
            ensure_ascii=False,
            sort_keys=True,
            separators=(",", ":"),
        )
        return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def parse_session_ended(
    payload: Any,
    *,
    now: datetime | None = None,
    max_transcript_bytes: int = DEFAULT_MAX_TRANSCRIPT_BYTES,
    default_occurred_at: datetime | None = None,
) -> SessionEnded:
    """Validate a decoded JSON payload into a :class:`SessionEnded`.

    Args:
        payload: the decoded JSON object.
        now: the writer's clock (UTC), for the future-date check; defaults to the current time.
        max_transcript_bytes: the byte limit of the transcript.
        default_occurred_at: used when the payload has no ``occurred_at`` (the Pub/Sub publish
            time); without it a missing date is an error.

    Raises:
        InvalidEvent: the payload is not an object, or a field fails validation (the message
            names every failing field).
        EventTooLarge: the transcript exceeds ``max_transcript_bytes``.
    """
    if not isinstance(payload, dict):
        raise InvalidEvent(f"event must be a JSON object, got {type(payload).__name__}")
    if payload.get("occurred_at") in (None, "") and default_occurred_at is not None:
        payload = {**payload, "occurred_at": default_occurred_at.isoformat()}
    try:
        event = SessionEnded.model_validate(payload)
    except InvalidEvent:
        raise
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'event'}: {err['msg']}"
            for err in exc.errors()[:10]
        )
        raise InvalidEvent(f"invalid session-end event: {problems}") from exc
    size = event.transcript_bytes()
    if size > max_transcript_bytes:
        raise EventTooLarge(
            f"transcript of session {event.session_id} is {size} bytes; "
            f"the limit is {max_transcript_bytes} bytes"
        )
    clock = now or datetime.now(UTC)
    if event.occurred_at - clock > MAX_FUTURE_SKEW:
        raise InvalidEvent(
            f"occurred_at {event.occurred_at.isoformat()} is in the future "
            f"(more than {MAX_FUTURE_SKEW} after {clock.isoformat()})"
        )
    return event
