"""The two entry-point handlers, free of any web or cloud framework.

``functions/*/main.py`` decode a CloudEvent or HTTP request into plain values and call these. The
retry-or-ack decision of the writer is made here, in one place:

| outcome                                | handler result               | Pub/Sub                |
|----------------------------------------|------------------------------|------------------------|
| committed / duplicate (redelivery)     | returns                      | acknowledged           |
| :class:`PermanentError` (bad event...) | returns ``rejected``, logs   | acknowledged, no retry |
| :class:`TransientError`, other errors  | raises                       | redelivered, then      |
|                                        |                              | dead-lettered          |
"""

from __future__ import annotations

import hmac
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal

from memrepo.errors import InvalidRequest, PermanentError, TransientError, Unauthorized
from memrepo.ids import validate_user_id

# Each handler imports its own request models (pydantic) when first called: the writer's
# (envelope, events) and the retrieval's (conversation) are never built in the other function.
if TYPE_CHECKING:  # imported by the entry points' builders; a cold start loads its path only
    from memrepo.retrieval.service import Retriever
    from memrepo.writer.service import SessionWriter, WriteResult

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteOutcome:
    """What the writer did with one message; every outcome returned is safe to acknowledge."""

    status: Literal["committed", "duplicate", "rejected"]
    detail: str
    result: WriteResult | None = None


def handle_session_message(
    writer: SessionWriter,
    cloud_event_data: Any,
    *,
    max_transcript_bytes: int,
    now: datetime | None = None,
) -> WriteOutcome:
    """Decode a Pub/Sub CloudEvent's data, write the session, and decide ack or retry.

    Args:
        writer: the session writer.
        cloud_event_data: the CloudEvent's ``data`` (Eventarc or push-subscription shape).
        max_transcript_bytes: the transcript byte limit.
        now: the clock, for the future-date check.

    Returns:
        The outcome; ``rejected`` means a permanent error was logged and the message may be
        acknowledged.

    Raises:
        TransientError: (and any unexpected exception) so the function fails and Pub/Sub
            redelivers.
    """
    from memrepo.envelope import parse_pubsub_envelope
    from memrepo.events import parse_session_ended

    started = time.monotonic()
    message_id = user_id = session_id = None
    try:
        message = parse_pubsub_envelope(cloud_event_data)
        message_id = message.message_id
        payload = message.json()
        if isinstance(payload, dict):
            user_id, session_id = payload.get("user_id"), payload.get("session_id")
        event = parse_session_ended(
            payload,
            now=now,
            max_transcript_bytes=max_transcript_bytes,
            default_occurred_at=message.publish_time,
        )
        result = writer.write(event)
    except PermanentError as exc:
        log.error(
            "session event rejected: %s",
            exc,
            extra={
                "message_id": message_id,
                "user_id": _loggable(user_id),
                "session_id": _loggable(session_id),
                "error": type(exc).__name__,
            },
        )
        return WriteOutcome("rejected", f"{type(exc).__name__}: {exc}")
    except TransientError as exc:
        log.warning(
            "session event failed transiently; raising for redelivery: %s",
            exc,
            extra={
                "message_id": message_id,
                "user_id": _loggable(user_id),
                "session_id": _loggable(session_id),
                "error": type(exc).__name__,
            },
        )
        raise
    log.info(
        "session %s",
        result.status,
        extra={
            "message_id": message_id,
            "user_id": result.user_id,
            "session_id": result.session_id,
            "commit": result.commit,
            "generation": result.generation,
            "attempts": result.attempts,
            "writer": result.writer,
            "elapsed_ms": round((time.monotonic() - started) * 1000, 1),
        },
    )
    return WriteOutcome(result.status, result.commit, result)


def _loggable(value: object) -> str | None:
    """Return a bounded, printable form of an untrusted id for logs."""
    if value is None:
        return None
    return repr(value)[:80]


@dataclass(frozen=True)
class HttpResponse:
    """A framework-free HTTP response: status, JSON body, extra headers."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def _error(status: int, message: str, **headers: str) -> HttpResponse:
    return HttpResponse(status, {"error": message}, dict(headers))


def handle_context_request(
    retriever: Retriever,
    *,
    method: str,
    body: bytes,
    headers: Mapping[str, str],
    auth_token: str | None,
    default_max_tokens: int,
) -> HttpResponse:
    """Answer ``POST {user_id, conversation, max_tokens, deadline_ms?}`` with a context.

    Status codes: 200 with ``{context, blocks, tokens_used, engine, elapsed_ms, ...}``; 400 for a
    bad body (message names the field); 401 for a missing or wrong bearer token when
    ``auth_token`` is set; 405 for another method; 503 (``Retry-After``) for a transient store
    failure. Unexpected errors propagate (the framework answers 500 and logs the traceback).
    """
    from memrepo.conversation import parse_conversation

    if method.upper() != "POST":
        return _error(405, "use POST with a JSON body", Allow="POST")
    if auth_token:
        given = headers.get("authorization") or headers.get("Authorization") or ""
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.encode(), auth_token.encode()
        ):
            log.warning("context request refused: missing or wrong bearer token")
            return _error(
                401,
                str(Unauthorized("missing or wrong bearer token")),
                **{"WWW-Authenticate": "Bearer"},
            )
    try:
        if not body.strip():
            raise InvalidRequest(
                "request body is empty; expected JSON {user_id, conversation, max_tokens}"
            )
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest("request body is not UTF-8 text") from exc
        try:
            request = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidRequest(f"request body is not JSON: {exc}") from exc
        if not isinstance(request, dict):
            raise InvalidRequest("request body must be a JSON object")
        try:
            user_id = validate_user_id(request.get("user_id"))
        except PermanentError as exc:
            raise InvalidRequest(str(exc)) from exc
        conversation = parse_conversation(request.get("conversation"))
        max_tokens = retriever.check_budget(request.get("max_tokens", default_max_tokens))
        deadline_ms = request.get("deadline_ms")
        if deadline_ms is not None and (
            isinstance(deadline_ms, bool)
            or not isinstance(deadline_ms, int)
            or not 100 <= deadline_ms <= 120_000
        ):
            raise InvalidRequest("deadline_ms must be an integer between 100 and 120000")
        result = retriever.context(
            user_id,
            conversation,
            max_tokens,
            deadline_s=deadline_ms / 1000 if deadline_ms is not None else None,
        )
    except InvalidRequest as exc:
        log.info("context request rejected: %s", exc)
        return _error(400, str(exc))
    except TransientError as exc:
        log.warning("context request failed transiently: %s", exc)
        return _error(503, f"temporarily unavailable: {exc}", **{"Retry-After": "1"})
    log.info(
        "context served",
        extra={
            "user_id": user_id,
            "engine": result.engine,
            "tokens_used": result.tokens_used,
            "elapsed_ms": round(result.elapsed_ms, 1),
        },
    )
    return HttpResponse(200, result.to_json(), {})
