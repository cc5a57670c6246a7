"""Apply a change to one user's repository with optimistic concurrency.

Every write path (a session, a revert, onboarding, the last step of a rebuild) follows one loop,
kept here so none of them copies it (DESIGN.md invariant 1):

1. ``repos.checkout(user)`` gives a private workspace and an opaque *token* (today the bundle's
   generation; treat it as opaque);
2. the change function reads and commits in the workspace and says whether to save;
3. ``repos.save(ws, token)`` uploads with the token as precondition; on
   :class:`~memrepo.errors.PreconditionFailed` (another writer was first) wait with full-jitter
   exponential backoff and start again from 1 on the newer state, at most ``max_attempts`` times,
   then raise :class:`~memrepo.errors.ConflictRetriesExhausted` (transient);
4. after a save succeeded, the *after-save hooks* run (the git mirror): a hook that fails is
   logged at WARNING and never fails or repeats the change.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from memrepo.errors import ConflictRetriesExhausted, PreconditionFailed
from memrepo.repos import UserRepos
from memrepo.workspace import Workspace

log = logging.getLogger(__name__)

T = TypeVar("T")

#: A hook run after a successful save, with the saved workspace (still open, at the saved tip).
AfterSave = Callable[[Workspace], None]


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What a change function returns: a value for the caller and whether to save the workspace.

    Attributes:
        value: anything the caller needs back (a commit id, a status).
        save: ``False`` when the change found nothing to do (a duplicate, an existing profile):
            nothing is uploaded and no hook runs.
    """

    value: T
    save: bool = True


@dataclass(frozen=True)
class Applied(Generic[T]):
    """The result of :meth:`RepoChanger.apply`.

    Attributes:
        value: the change function's value from the round that ended the loop.
        saved: whether a bundle was uploaded.
        token: the store token after the save (or the one read, when nothing was saved).
        attempts: hydrate-change-save rounds used, 1 or more.
    """

    value: T
    saved: bool
    token: Any
    attempts: int


class RepoChanger:
    """Run change functions on user repositories under the loop of the module docstring."""

    def __init__(
        self,
        repos: UserRepos,
        *,
        max_attempts: int = 10,
        backoff_s: float = 0.05,
        max_backoff_s: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        after_save: Sequence[AfterSave] = (),
        lean: bool = False,
    ) -> None:
        """Args:
        repos: the user repositories.
        max_attempts: rounds before :class:`ConflictRetriesExhausted`, at least 1.
        backoff_s: first backoff in seconds, doubled per attempt, with full jitter.
        max_backoff_s: backoff ceiling in seconds.
        sleep: the sleep function (tests pass a fake clock).
        after_save: hooks run after each successful save (failures logged, never raised).
        lean: check out lean workspaces (``UserRepos.checkout(lean=True)``: ``sessions/`` in
            the index only) for changes that only use the :class:`Workspace` API and add files.
        """
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        self.repos = repos
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.after_save = list(after_save)
        self.lean = lean
        self._sleep = sleep

    def apply(
        self,
        user_id: str,
        change: Callable[[Workspace], Outcome[T]],
        *,
        what: str,
        log_extra: Mapping[str, Any] | None = None,
    ) -> Applied[T]:
        """Apply ``change`` to the user's repository and save it with a precondition.

        Args:
            user_id: the user (validated by ``repos.checkout``).
            change: called with a fresh workspace on every round; it must be repeatable (it may
                run again on a newer state) and must not upload anything itself.
            what: a short description for messages and logs (``"session s1 of ana"``).
            log_extra: fields added to this loop's log records (ids, never content).

        Returns:
            The :class:`Applied` result of the round that saved (or decided not to).

        Raises:
            ConflictRetriesExhausted: ``max_attempts`` saves lost to concurrent writers.
            MemrepoError: whatever ``change`` or the store raises (not retried here).
        """
        extra = {"user_id": user_id, **(log_extra or {})}
        for attempt in range(1, self.max_attempts + 1):
            ws, token = self.repos.checkout(user_id, lean=self.lean)
            with ws:
                outcome = change(ws)
                if not outcome.save:
                    return Applied(outcome.value, False, token, attempt)
                try:
                    new_token = self.repos.save(ws, token)
                except PreconditionFailed:
                    delay = random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2**attempt))  # noqa: S311
                    log.info(
                        "bundle changed under us; re-applying %s", what,
                        extra={**extra, "attempt": attempt, "backoff_s": round(delay, 3)},
                    )
                    self._sleep(delay)
                    continue
                self.run_after_save(ws, extra)
            return Applied(outcome.value, True, new_token, attempt)
        raise ConflictRetriesExhausted(
            f"{what}: {self.max_attempts} attempts lost to concurrent writers"
        )

    def run_after_save(self, ws: Workspace, extra: Mapping[str, Any] | None = None) -> None:
        """Run every after-save hook on ``ws``; a failing hook is logged at WARNING, not raised."""
        for hook in self.after_save:
            try:
                hook(ws)
            except Exception as exc:  # noqa: BLE001 - a hook must never fail a saved write
                log.warning(
                    "after-save hook %s failed: %s", getattr(hook, "__name__", type(hook).__name__),
                    type(exc).__name__, extra={**(extra or {}), "error": type(exc).__name__},
                )
