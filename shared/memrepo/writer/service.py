"""Writing one session: hydrate, check idempotency, prepare, commit once, save with a precondition.

The loop (DESIGN.md invariants 1 and 2), run by :class:`memrepo.operations.apply.RepoChanger`:

1. hydrate the user's repository at generation ``G`` (0 for a new user);
2. if a commit with ``Session-Id: <id>`` exists, stop: same digest → ``duplicate`` (a redelivery),
   other digest → :class:`SessionConflict` (permanent);
3. let the engine prepare the session's files; write them; commit once with trailers
   (:func:`commit_session`, also used by the rebuild);
4. save the bundle with ``if_generation_match=G``; on :class:`PreconditionFailed` (another writer
   was first) wait with jittered exponential backoff and start again from 1, at most
   ``max_attempts`` times, then raise :class:`ConflictRetriesExhausted` so Pub/Sub redelivers;
5. after the save, run the after-save hooks (the git mirror), whose failures are only logged.

Only a save that succeeded returns ``committed``: the caller acknowledges after that and only then.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from memrepo.errors import SessionConflict
from memrepo.events import SessionEnded
from memrepo.operations.apply import AfterSave, Outcome, RepoChanger
from memrepo.repos import UserRepos
from memrepo.workspace import Workspace
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


def commit_session(ws: Workspace, engine: WriterEngine, event: SessionEnded) -> tuple[str, str]:
    """Prepare ``event`` with ``engine``, write its files and commit them once, with trailers.

    The trailers are ``Session-Id``, ``Session-Digest``, ``Occurred-At``, ``Writer`` and the
    plan's extra trailers; the author date is ``occurred_at``. Nothing is uploaded.

    Returns:
        ``(commit id, writer name recorded)``.

    Raises:
        GitError, LLMError: from git or the engine (nothing is committed then).
    """
    plan = engine.prepare(ws, event)
    for path, text in plan.files.items():
        ws.write(path, text)
    commit = ws.commit(
        plan.message,
        {
            "Session-Id": event.session_id,
            "Session-Digest": event.digest(),
            "Occurred-At": event.occurred_at.isoformat(),
            "Writer": plan.writer,
            **plan.extra_trailers,
        },
        author_date=event.occurred_at,
    )
    return commit, plan.writer


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
        after_save: Sequence[AfterSave] = (),
    ) -> None:
        """Args:
        repos: the user repositories.
        engine: prepares each session's files.
        max_attempts: hydrate-apply-save rounds before giving up on precondition failures.
        backoff_s: first backoff in seconds, doubled per attempt, with full jitter.
        max_backoff_s: backoff ceiling in seconds.
        sleep: the sleep function (tests pass a fake clock).
        after_save: hooks run after each successful save (the git mirror); failures are logged.
        """
        self.repos = repos
        self.engine = engine
        self.max_attempts = max_attempts
        self.changer = RepoChanger(
            repos,
            max_attempts=max_attempts,
            backoff_s=backoff_s,
            max_backoff_s=max_backoff_s,
            sleep=sleep,
            after_save=after_save,
            lean=True,  # the engines read through the Workspace API and only add transcripts
        )

    def write(self, event: SessionEnded) -> WriteResult:
        """Commit ``event`` exactly once to its user's repository and save it.

        Raises:
            SessionConflict: the session id is committed with another digest (permanent).
            ConflictRetriesExhausted: ``max_attempts`` saves lost to concurrent writers.
            StoreUnavailable, GitError, LLMUnavailable: transient failures (retry).
        """
        digest = event.digest()
        ids = {"user_id": event.user_id, "session_id": event.session_id}

        def change(ws: Workspace) -> Outcome[tuple[Literal["committed", "duplicate"], str, str]]:
            found = ws.find_session(event.session_id)
            if found is not None:
                if found.digest not in (None, digest):
                    raise SessionConflict(
                        f"session {event.session_id} of {event.user_id} is already committed "
                        f"({found.commit[:12]}) with digest {found.digest}; this delivery has "
                        f"digest {digest}"
                    )
                log.info("session already committed", extra=ids)
                return Outcome(("duplicate", found.commit, self.engine.name), save=False)
            commit, writer = commit_session(ws, self.engine, event)
            return Outcome(("committed", commit, writer))

        applied = self.changer.apply(
            event.user_id,
            change,
            what=f"session {event.session_id} of {event.user_id}",
            log_extra={"session_id": event.session_id},
        )
        status, commit, writer = applied.value
        return WriteResult(
            status, event.user_id, event.session_id, commit, applied.token, applied.attempts, writer
        )
