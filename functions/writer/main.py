"""Writer function: a Pub/Sub ``messagePublished`` CloudEvent → one commit in the user's memory.

Thin by design: decode, call :func:`memrepo.handlers.handle_session_message`, and let its decision
stand — returning acknowledges the message; raising makes Pub/Sub redeliver it. When the event
carries a ``traceparent`` extension (Eventarc's tracing), its log lines join that trace.
"""

# ruff: noqa: E402 - the environment is set up before the imports below
from __future__ import annotations

from memrepo import prefork

prefork.begin()  # see memrepo.prefork: no GC while importing, frozen before the fork
try:
    import os
    from functools import cache

    import functions_framework
    import memrepo.chain  # noqa: F401 - the modules every write needs, preloaded (see below)
    import memrepo.envelope  # noqa: F401
    import memrepo.events  # noqa: F401
    import memrepo.layout  # noqa: F401
    import memrepo.repos  # noqa: F401
    import memrepo.store  # noqa: F401
    import memrepo.writer.deterministic  # noqa: F401
    import memrepo.writer.service  # noqa: F401
    from cloudevents.http.event import CloudEvent
    from memrepo import bootstrap, logs
    from memrepo.handlers import handle_session_message
    from memrepo.settings import Settings
finally:
    prefork.end()

# The library imports lazily, so the first event would import the modules above in gunicorn's
# worker; imported here, before the worker is forked, their pages stay shared between master and
# worker instead of being copied into the worker (less memory in all, no more time). Only what
# every write needs: the LLM writer's modules, loaded when configured, stay lazy.


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
