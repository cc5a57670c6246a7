"""A writer function that kills its own process (SIGKILL, no cleanup) at a chosen point.

``CRASH_AT`` is ``after_hydrate`` (before anything is committed), ``after_commit`` (committed in
the workspace, not uploaded) or ``during_upload`` (SIGKILL a few milliseconds into the upload).
Everything else is the real writer: real store adapter, real engine, real handler.
"""

from __future__ import annotations

import os
import signal
import threading

import functions_framework
from cloudevents.http.event import CloudEvent
from memrepo.events import SessionEnded
from memrepo.handlers import handle_session_message
from memrepo.repos import UserRepos
from memrepo.settings import Settings
from memrepo.store import BundleStore, StoredObject, open_store
from memrepo.workspace import Workspace
from memrepo.writer import CommitPlan, DeterministicWriter, SessionWriter

CRASH_AT = os.environ["CRASH_AT"]


def _die() -> None:
    """Kill the whole instance (the server's process group: gunicorn's arbiter and workers)."""
    os.killpg(os.getpgrp(), signal.SIGKILL)


class CrashingEngine(DeterministicWriter):
    def prepare(self, ws: Workspace, event: SessionEnded) -> CommitPlan:
        if CRASH_AT == "after_hydrate":
            _die()
        return super().prepare(ws, event)


class CrashingStore(BundleStore):
    def __init__(self, inner: BundleStore) -> None:
        self.inner = inner
        self.url = inner.url

    def _get(self, key: str) -> StoredObject | None:
        return self.inner.get(key)

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        if CRASH_AT == "after_commit":
            _die()
        if CRASH_AT == "during_upload":
            threading.Timer(0.003, _die).start()
        return self.inner.put(key, data, if_generation_match=if_generation_match)

    def _delete(self, key: str, all_versions: bool) -> int:
        return self.inner.delete(key, all_versions=all_versions)

    def _list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)


settings = Settings.from_env(os.environ)
writer = SessionWriter(UserRepos(CrashingStore(open_store(settings.store_url))), CrashingEngine())


@functions_framework.cloud_event
def on_session_ended(cloud_event: CloudEvent) -> None:
    handle_session_message(
        writer, cloud_event.get_data(), max_transcript_bytes=settings.max_transcript_bytes
    )
