"""A messaging webhook that groups messages into sessions and publishes them to memrepo.

Deploy as an HTTP function (``functions-framework --target webhook``) next to memrepo's writer.
Endpoints (the platform-specific payload — WhatsApp, Messenger — is mapped to this small JSON
shape by a few lines in :func:`parse_message`; verify the platform's signature there too):

* ``POST /`` ``{"user_id", "speaker", "role", "text", "at"?, "end"?}`` → ``{"published": [ids]}``
* ``POST /flush`` → closes every session silent for the idle time (call it from Cloud Scheduler
  every few minutes, since nothing else runs between messages) → ``{"published": [ids]}``

Configuration: ``MEMREPO_TOPIC`` (``projects/P/topics/session-ended``), ``WEBHOOK_IDLE_MINUTES``
(default 30), ``WEBHOOK_STATE`` (``memory``, or a store URL such as ``gs://bucket/prefix`` for
one object per user; see grouping.py for the trade-off). Set ``PUBSUB_EMULATOR_HOST`` locally.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from functools import cache
from typing import Any

import flask
import functions_framework
from grouping import (
    ClosedSession,
    MemoryStateStore,
    Message,
    ObjectStateStore,
    SessionGrouper,
    StateStore,
    WebhookService,
)
from memrepo.client import MemoryClient
from memrepo.errors import InvalidEvent
from memrepo.ids import validate_user_id


def parse_message(body: Any) -> Message:
    """Map the request body to a :class:`Message`.

    Raises:
        InvalidEvent: a missing or malformed field.
    """
    if not isinstance(body, dict):
        raise InvalidEvent("expected JSON {user_id, speaker, role, text, at?, end?}")
    validate_user_id(body.get("user_id"))
    role = body.get("role", "user")
    if role not in ("user", "assistant", "other"):
        raise InvalidEvent(f"role must be user, assistant or other, got {role!r}")
    try:
        at = datetime.fromisoformat(body["at"]) if body.get("at") else None
    except (TypeError, ValueError) as exc:
        raise InvalidEvent(f"at is not an ISO 8601 time: {exc}") from exc
    return Message(body["user_id"], str(body.get("speaker") or body["user_id"]), role,
                   str(body.get("text") or ""), at, bool(body.get("end", False)))


@cache
def service() -> WebhookService:
    """Build the service once per instance (never at import)."""
    client = MemoryClient.from_env(os.environ)
    where = os.environ.get("WEBHOOK_STATE", "memory")
    states: StateStore = MemoryStateStore()
    if where != "memory":
        from memrepo.store import open_store

        states = ObjectStateStore(open_store(where))

    def publish(session: ClosedSession) -> str:
        return client.publish_session_end(
            session.user_id, session.session_id, session.turns, occurred_at=session.occurred_at,
            metadata={"source": "webhook", "closed_by": session.reason},
        )

    idle = timedelta(minutes=float(os.environ.get("WEBHOOK_IDLE_MINUTES", "30")))
    return WebhookService(SessionGrouper(idle), states, publish)


@functions_framework.http
def webhook(request: flask.Request) -> tuple[dict[str, Any], int]:
    """Receive one message (``POST /``) or close idle sessions (``POST /flush``)."""
    if request.method != "POST":
        return {"error": "use POST"}, 405
    if request.path.rstrip("/").endswith("/flush"):
        return {"published": service().flush()}, 200
    try:
        message = parse_message(request.get_json(silent=True))
        return {"published": service().receive(message)}, 200
    except InvalidEvent as exc:
        return {"error": str(exc)}, 400
