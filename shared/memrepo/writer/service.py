"""Writing one session: hydrate, check idempotency, prepare, commit once, save with a precondition.

The loop (DESIGN.md invariants 1 and 2):

1. hydrate the user's repository at generation ``G`` (0 for a new user);
2. if a commit with ``Session-Id: <id>`` exists, stop: same digest → ``duplicate`` (a redelivery),
   other digest → :class:`SessionConflict` (permanent);
3. let the engine prepare the session's files; write them; commit once with trailers;
4. save the bundle with ``if_generation_match=G``; on :class:`PreconditionFailed` (another writer
   was first) wait with jittered exponential backoff and start again from 1, at most
   ``max_attempts`` times, then raise :class:`ConflictRetriesExhausted` so Pub/Sub redelivers.

Only a save that succeeded returns ``committed``: the caller acknowledges after that and only then.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memrepo.errors import ConflictRetriesExhausted, PreconditionFailed, SessionConflict
from memrepo.events import SessionEnded
from memrepo.repos import UserRepos
from memrepo.writer.base import WriterEngine

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class WriteResult:
    """The outcome of writing one session."""

    status: Literal["committed", "duplicate"]
    user_id: str
    session_id: str
    commit: str
    generation: int
    attempts: int
    writer: str


class SessionWriter:
    """Apply sessions to user repositories (see the module docstring)."""

    def __init__(
        self,
        repos: UserRepos,
        engine: WriterEngine,
        *,
        max_attempts: int = 10,
        backoff_s: float = 0.05,
        max_backoff_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Args:
        repos: the user repositories.
        engine: prepares each session's files.
        max_attempts: hydrate-apply-save rounds before giving up on precondition failures.
        backoff_s: first backoff in seconds, doubled per attempt, with full jitter.
        max_backoff_s: backoff ceiling in seconds.
        sleep: the sleep function (tests pass a fake clock).
        """
        self.repos = repos
        self.engine = engine
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self._sleep = sleep

    def write(self, event: SessionEnded) -> WriteResult:
        """Commit ``event`` exactly once to its user's repository and save it.

        Raises:
            SessionConflict: the session id is committed with another digest (permanent).
            ConflictRetriesExhausted: ``max_attempts`` saves lost to concurrent writers.
            StoreUnavailable, GitError, LLMUnavailable: transient failures (retry).
        """
        digest = event.digest()
        for attempt in range(1, self.max_attempts + 1):
            ws, generation = self.repos.checkout(event.user_id)
            with ws:
                found = ws.find_session(event.session_id)
                if found is not None:
                    if found.digest not in (None, digest):
                        raise SessionConflict(
                            f"session {event.session_id} of {event.user_id} is already committed "
                            f"({found.commit[:12]}) with digest {found.digest}; this delivery has "
                            f"digest {digest}"
                        )
                    log.info(
                        "session already committed",
                        extra={"user_id": event.user_id, "session_id": event.session_id},
                    )
                    return WriteResult(
                        "duplicate", event.user_id, event.session_id, found.commit, generation,
                        attempt, self.engine.name,
                    )
                plan = self.engine.prepare(ws, event)
                for path, text in plan.files.items():
                    ws.write(path, text)
                commit = ws.commit(
                    plan.message,
                    {
                        "Session-Id": event.session_id,
                        "Session-Digest": digest,
                        "Occurred-At": event.occurred_at.isoformat(),
                        "Writer": plan.writer,
                        **plan.extra_trailers,
                    },
                    author_date=event.occurred_at,
                )
                try:
                    new_generation = self.repos.save(ws, generation)
                except PreconditionFailed:
                    delay = random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2**attempt))  # noqa: S311
                    log.info(
                        "bundle changed under us; re-applying",
                        extra={"user_id": event.user_id, "session_id": event.session_id,
                               "attempt": attempt, "backoff_s": round(delay, 3)},
                    )
                    self._sleep(delay)
                    continue
            return WriteResult(
                "committed", event.user_id, event.session_id, commit, new_generation, attempt,
                plan.writer,
            )
        raise ConflictRetriesExhausted(
            f"session {event.session_id} of {event.user_id}: {self.max_attempts} attempts lost "
            "to concurrent writers"
        )
