"""Writer function: a Pub/Sub ``messagePublished`` CloudEvent → one commit in the user's memory.

Thin by design: decode, call :func:`memrepo.handlers.handle_session_message`, and let its decision
stand — returning acknowledges the message; raising makes Pub/Sub redeliver it. When the event
carries a ``traceparent`` extension (Eventarc's tracing), its log lines join that trace.
"""

from __future__ import annotations

import os
from functools import cache

import functions_framework
from cloudevents.http.event import CloudEvent
from memrepo import bootstrap, logs
from memrepo.handlers import handle_session_message
from memrepo.settings import Settings


@cache
def _settings() -> Settings:
    logs.configure()
    return Settings.from_env(os.environ)


@functions_framework.cloud_event
def on_session_ended(cloud_event: CloudEvent) -> None:
    """Handle one session-end event (acknowledged on return, redelivered on exception)."""
    settings = _settings()
    project = os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("GCP_PROJECT")
    trace = logs.trace_fields({"traceparent": str(cloud_event.get("traceparent") or "")}, project)
    with logs.bind(event_id=cloud_event.get("id"), **trace):
        handle_session_message(
            bootstrap.writer(settings),
            cloud_event.get_data(),
            max_transcript_bytes=settings.max_transcript_bytes,
        )
