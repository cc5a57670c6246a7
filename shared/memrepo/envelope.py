"""The Pub/Sub envelope around a session-end event, parsed apart from the payload.

A Pub/Sub ``messagePublished`` CloudEvent carries ``data`` of the shape (Pub/Sub push format,
https://cloud.google.com/pubsub/docs/push#receive_push)::

    {"message": {"data": "<base64>", "attributes": {...}, "messageId": "...",
                 "publishTime": "2024-05-01T09:30:00.123Z", "orderingKey": "..."},
     "subscription": "projects/p/subscriptions/s"}

Eventarc (production) and a push subscription converted by functions-framework (local) differ in
small ways: Eventarc may spell ids ``message_id``/``publish_time`` as well, attributes may be absent
or ``null``, and ``subscription`` may be missing. Both are accepted here.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memrepo.errors import InvalidEvent


@dataclass(frozen=True)
class PubSubMessage:
    """One decoded Pub/Sub message: its payload bytes and delivery metadata."""

    data: bytes
    attributes: dict[str, str] = field(default_factory=dict)
    message_id: str | None = None
    publish_time: datetime | None = None
    ordering_key: str | None = None
    subscription: str | None = None

    def json(self) -> Any:
        """Return the payload decoded as UTF-8 JSON.

        Raises:
            InvalidEvent: the payload is empty, not UTF-8, or not JSON.
        """
        if not self.data:
            raise InvalidEvent("Pub/Sub message has no data")
        try:
            return json.loads(self.data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InvalidEvent("Pub/Sub message data is not UTF-8 text") from exc
        except json.JSONDecodeError as exc:
            raise InvalidEvent(f"Pub/Sub message data is not JSON: {exc.msg} at {exc.pos}") from exc


def _first(mapping: dict[str, Any], *names: str) -> Any:
    for name in names:
        if mapping.get(name) not in (None, ""):
            return mapping[name]
    return None


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def parse_pubsub_envelope(data: Any) -> PubSubMessage:
    """Parse the ``data`` of a Pub/Sub CloudEvent (Eventarc or push shape).

    Args:
        data: the CloudEvent's data: a dict, or JSON bytes/str of one.

    Returns:
        The message with its base64 payload decoded to bytes.

    Raises:
        InvalidEvent: ``data`` is not an envelope, or the payload is not valid base64.
    """
    if isinstance(data, bytes | str):
        try:
            data = json.loads(data)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise InvalidEvent("CloudEvent data is not JSON") from exc
    if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
        raise InvalidEvent("CloudEvent data has no Pub/Sub 'message' object")
    message: dict[str, Any] = data["message"]
    raw = message.get("data") or ""
    if not isinstance(raw, str):
        raise InvalidEvent("Pub/Sub message data must be a base64 string")
    try:
        payload = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidEvent("Pub/Sub message data is not valid base64") from exc
    attributes = message.get("attributes") or {}
    if not isinstance(attributes, dict):
        raise InvalidEvent("Pub/Sub message attributes must be an object")
    return PubSubMessage(
        data=payload,
        attributes={str(k): str(v) for k, v in attributes.items()},
        message_id=_first(message, "messageId", "message_id"),
        publish_time=_parse_time(_first(message, "publishTime", "publish_time")),
        ordering_key=_first(message, "orderingKey", "ordering_key"),
        subscription=data.get("subscription"),
    )
