"""Publishing session-end events to a Pub/Sub topic (``google-cloud-pubsub``, imported lazily).

Messages carry the event JSON as data, the attributes ``user_id`` and ``session_id``, and the
user id as ordering key (https://cloud.google.com/pubsub/docs/ordering), so one user's sessions
are delivered in publish order where the subscription enables ordering. The writer stays correct
without ordering. Set ``PUBSUB_EMULATOR_HOST`` (read by the client library) for the emulator.
"""

from __future__ import annotations

import json
from concurrent.futures import Future
from typing import Any

from memrepo.errors import StoreUnavailable
from memrepo.events import SessionEnded


class SessionPublisher:
    """Publish :class:`SessionEnded` events to one topic."""

    def __init__(self, topic_path: str, *, ordering: bool = True, client: Any = None) -> None:
        """Args:
        topic_path: ``projects/<project>/topics/<topic>``.
        ordering: publish with the user id as ordering key.
        client: a ``pubsub_v1.PublisherClient`` (built on first use when omitted).
        """
        self.topic_path = topic_path
        self.ordering = ordering
        self._client = client

    def _publisher(self) -> Any:
        if self._client is None:
            from google.cloud import pubsub_v1

            options = pubsub_v1.types.PublisherOptions(enable_message_ordering=self.ordering)
            self._client = pubsub_v1.PublisherClient(publisher_options=options)
        return self._client

    def publish(self, event: SessionEnded) -> Future[str]:
        """Publish ``event``; return the future of its message id."""
        data = json.dumps(event.model_dump(mode="json"), ensure_ascii=False).encode("utf-8")
        kwargs: dict[str, str] = {"user_id": event.user_id, "session_id": event.session_id}
        if self.ordering:
            kwargs["ordering_key"] = event.user_id
        future: Future[str] = self._publisher().publish(self.topic_path, data, **kwargs)
        return future

    def publish_all(self, events: list[SessionEnded], timeout_s: float = 60.0) -> list[str]:
        """Publish ``events`` and wait for every message id.

        Raises:
            StoreUnavailable: a publish failed or timed out (transient).
        """
        futures = [self.publish(e) for e in events]
        try:
            return [f.result(timeout=timeout_s) for f in futures]
        except Exception as exc:  # noqa: BLE001 - translated into the project's tree
            raise StoreUnavailable(f"publishing to {self.topic_path} failed: {exc}") from exc
