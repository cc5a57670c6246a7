"""Rebuild (replay): re-derive a user's memory from the archived transcripts, resumably.

``Rebuilder.rebuild(user)`` reads every transcript under ``sessions/`` of the user's current tip
(:func:`memrepo.transcript.parse`, each checked against the digest in its front matter), orders
them by ``occurred_at`` (then session id), and writes them one by one with the *current* writer
engine onto a fresh history in a private work repository, exactly as the session writer would
(:func:`memrepo.writer.service.commit_session`). The result is saved in one precondition-checked
write that replaces the branch.

History (chosen so nothing is lost and the branch only ever moves forward)::

    R0 ── S1 ── S2 ── … ── Sn ──┐                  new lineage (first parents)
                                M   "Rebuild of <user>'s memory"
    … ── old tip ───────────────┘                  replaced lineage (second parent)

* ``R0`` is a new root commit recording ``Rebuilt-From: <tip at start>`` and
  ``Rebuild-Writer: <engine>``; it starts from the onboarding commit's files when the user was
  onboarded (``Onboarded:`` trailer kept), else from an empty tree.
* ``M`` is a merge whose tree is ``Sn``'s, whose first parent is the new lineage and whose second
  parent is the tip it replaces, with ``Rebuilt-From: <replaced tip>``, ``Rebuild-Sessions: n``
  and ``Writer: <engine>``. The bundle still holds the single ref ``refs/heads/user/<id>``
  (isolation and the hydrate check are unchanged), the old state stays reachable, and the push
  to a mirror is a fast-forward.
* ``git log --first-parent`` shows the current lineage; plain ``git log`` also walks the replaced
  one (so a redelivered or reverted session is still recognised by its old commit).
* To undo a rebuild: ``git revert -m 2 <M>`` restores the replaced tree (or check out ``M^2``).

Resumable: the work repository is checkpointed as a bundle of the same branch at
``users/<id>/rebuild/work.bundle`` (its own generation, written with ``if_generation_match``) every
``checkpoint_every`` sessions or ``checkpoint_interval_s`` seconds. A later run hydrates it and
continues after the last replayed session, provided it was made by the same engine and all of its
sessions are still in the live tip; a checkpoint already merged (crash after the final save) or
stale is discarded. Sessions written while a rebuild runs are replayed at the end, before ``M``;
the final save retries on precondition failures like any write (:mod:`memrepo.operations.apply`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC

from memrepo import frontmatter, transcript
from memrepo.errors import PermanentError, PreconditionFailed, TransientError
from memrepo.events import SessionEnded
from memrepo.gitcli import git, git_text
from memrepo.ids import validate_user_id
from memrepo.operations.apply import Outcome, RepoChanger
from memrepo.operations.onboard import ONBOARDED, onboarding_commit
from memrepo.store.base import BundleStore
from memrepo.workspace import Workspace
from memrepo.writer.base import WriterEngine
from memrepo.writer.service import commit_session

log = logging.getLogger(__name__)

REBUILT_FROM = "Rebuilt-From"
REBUILD_WRITER = "Rebuild-Writer"
_WORK_REF = "refs/memrepo-rebuild/new"


class NothingToRebuild(PermanentError):
    """Raised when the user has no memory, or no transcript under ``sessions/``."""


class CorruptTranscript(PermanentError):
    """Raised when an archived transcript does not parse or its digest does not match."""


class RebuildInterrupted(TransientError):
    """Raised when another rebuild of the same user wrote the checkpoint, or the live memory lost
    a replayed session (reverted) during the rebuild; the checkpoint is dropped, run again."""


@dataclass(frozen=True)
class Progress:
    """One step of a rebuild, passed to the progress callback.

    Attributes:
        done: sessions replayed so far (including those resumed from a checkpoint).
        total: sessions to replay (grows if sessions arrive during the rebuild).
        session_id: the session just replayed, or ``None`` for the start and the final save.
        checkpointed: whether the work repository was just checkpointed.
        stage: ``start``, ``replay`` or ``saved``.
    """

    done: int
    total: int
    session_id: str | None
    checkpointed: bool
    stage: str


@dataclass(frozen=True)
class RebuildResult:
    """The outcome of a rebuild.

    Attributes:
        user_id: the user.
        commit: the merge commit ``M`` now at the tip.
        replaced: the tip it replaced (``M``'s second parent).
        sessions: sessions replayed in the new lineage.
        resumed_from: sessions taken from a checkpoint (0 for a fresh run).
        generation: the store token after the save.
        attempts: final save rounds used.
        writer: the engine's name.
        elapsed_s: wall time in seconds.
    """

    user_id: str
    commit: str
    replaced: str
    sessions: int
    resumed_from: int
    generation: int
    attempts: int
    writer: str
    elapsed_s: float


def checkpoint_key(user_id: str) -> str:
    """Return the store key of a user's rebuild checkpoint, ``users/<id>/rebuild/work.bundle``."""
    return f"users/{validate_user_id(user_id)}/rebuild/work.bundle"


def archived_sessions(ws: Workspace) -> list[SessionEnded]:
    """Return the sessions archived under ``sessions/`` in replay order (occurred_at, id).

    Raises:
        CorruptTranscript: a transcript does not parse or does not match its recorded digest.
    """
    events = []
    for path in ws.files("sessions/"):
        if not path.endswith(".md"):
            continue
        text = ws.read(path) or ""
        try:
            event = transcript.parse(text, ws.user_id)
        except PermanentError as exc:
            raise CorruptTranscript(f"{path} of {ws.user_id} does not parse: {exc}") from exc
        recorded = frontmatter.split(text)[0].get("digest")
        if recorded and recorded != event.digest():
            raise CorruptTranscript(
                f"{path} of {ws.user_id}: digest {event.digest()} is not the recorded {recorded}"
            )
        events.append(event)
    return sorted(events, key=lambda e: (e.occurred_at.astimezone(UTC), e.session_id))


def _replayed(work: Workspace) -> list[str]:
    out = git_text(
        ["log", "--first-parent", "--reverse",
         "--format=%(trailers:key=Session-Id,valueonly)%x1e", work.branch],
        work.path,
    )
    return [r.strip() for r in out.split("\x1e") if r.strip()]


def _root_trailers(work: Workspace) -> dict[str, str]:
    root = git_text(["rev-list", "--max-parents=0", work.branch], work.path).split()[0]
    out = git_text(["log", "-1", "--format=%(trailers:only,unfold)", root], work.path)
    pairs = (line.partition(": ") for line in out.splitlines() if ": " in line)
    return {k: v.strip() for k, _, v in pairs}


class Rebuilder:
    """Rebuild users' memories with one engine (see the module docstring)."""

    def __init__(
        self,
        changer: RepoChanger,
        engine: WriterEngine,
        checkpoints: BundleStore,
        *,
        checkpoint_every: int = 5,
        checkpoint_interval_s: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        changer: saves the final state (with the after-save hooks, e.g. the mirror).
        engine: the writer engine to replay with (deterministic or LLM).
        checkpoints: where the work bundle is checkpointed (the bundle store).
        checkpoint_every: checkpoint after this many replayed sessions (at least 1).
        checkpoint_interval_s: also checkpoint when this many seconds passed since the last one.
        clock: a monotonic clock in seconds.
        """
        self.changer = changer
        self.repos = changer.repos
        self.engine = engine
        self.checkpoints = checkpoints
        self.checkpoint_every = max(1, checkpoint_every)
        self.checkpoint_interval_s = checkpoint_interval_s
        self._clock = clock

    def rebuild(
        self, user_id: str, *, on_progress: Callable[[Progress], None] | None = None
    ) -> RebuildResult:
        """Replay ``user_id``'s archived sessions onto a new lineage and save it (resumable).

        Args:
            user_id: the user.
            on_progress: called after the start, each replayed session and the final save.

        Returns:
            The :class:`RebuildResult`.

        Raises:
            NothingToRebuild: no memory or no transcript. CorruptTranscript: a bad transcript.
            RebuildInterrupted: a concurrent rebuild or revert; run again.
            ConflictRetriesExhausted, StoreUnavailable, GitError, LLMError: transient failures;
                the checkpoint is kept and the next run resumes from it.
        """
        began = self._clock()
        report = on_progress or (lambda p: None)
        key = checkpoint_key(user_id)
        live, _ = self.repos.checkout(user_id)
        with live:
            start_tip = live.head()
            if start_tip is None:
                raise NothingToRebuild(f"user {user_id} has no memory to rebuild")
            plan = archived_sessions(live)
            if not plan:
                raise NothingToRebuild(f"user {user_id} has no transcript under sessions/")
            stored = self.checkpoints.get(key)
            ck_generation = stored.generation if stored else 0
            work = self._resume(live, stored.data if stored else None, {e.session_id for e in plan})
            if work is None:
                work = self._start(live, start_tip)
        with work:
            done = _replayed(work)
            resumed = len(done)
            if resumed:
                log.info("rebuild resumed from checkpoint",
                         extra={"user_id": user_id, "sessions": resumed})
            remaining = [e for e in plan if e.session_id not in set(done)]
            report(Progress(len(done), len(plan), None, False, "start"))
            last = self._clock()
            for n, event in enumerate(remaining, start=1):
                commit_session(work, self.engine, event)
                done.append(event.session_id)
                due = (n % self.checkpoint_every == 0
                       or self._clock() - last >= self.checkpoint_interval_s)
                if due and n < len(remaining):
                    ck_generation = self._checkpoint(key, work, ck_generation)
                    last = self._clock()
                report(Progress(len(done), len(plan), event.session_id, due and n < len(remaining),
                                "replay"))
            if remaining:
                ck_generation = self._checkpoint(key, work, ck_generation)
            applied = self.changer.apply(
                user_id, lambda ws: self._finish(ws, work, done, key),
                what=f"rebuild of {user_id}",
            )
        commit, replaced = applied.value
        try:
            self.checkpoints.delete(key)
        except TransientError as exc:
            log.warning("rebuild saved but its checkpoint was not deleted: %s", exc,
                        extra={"user_id": user_id})
        report(Progress(len(done), len(done), None, False, "saved"))
        result = RebuildResult(
            user_id, commit, replaced, len(done), resumed, applied.token, applied.attempts,
            self.engine.name, self._clock() - began,
        )
        log.info("memory rebuilt", extra={
            "user_id": user_id, "commit": commit, "replaced": replaced, "sessions": len(done),
            "resumed_from": resumed, "elapsed_s": round(result.elapsed_s, 2)})
        return result

    # -- steps -----------------------------------------------------------------------------------

    def _start(self, live: Workspace, start_tip: str) -> Workspace:
        """Create the work repository with its root commit ``R0``."""
        work = Workspace.create(live.user_id, tmp_root=self.repos.tmp_root)
        try:
            trailers = {REBUILT_FROM: start_tip, REBUILD_WRITER: self.engine.name}
            onboarded = onboarding_commit(live)
            if onboarded is not None:
                commit, date = onboarded
                paths = git_text(["ls-tree", "-r", "--name-only", commit], live.path).splitlines()
                for path in paths:
                    if not path.startswith("sessions/"):
                        work.write(path, git_text(["show", f"{commit}:{path}"], live.path))
                trailers[ONBOARDED] = date
            work.commit(
                f"Rebuild of {live.user_id}'s memory from {start_tip[:12]}\n\n"
                f"Sessions are replayed from their transcripts with the {self.engine.name} writer.",
                trailers,
            )
        except BaseException:
            work.close()
            raise
        return work

    def _resume(self, live: Workspace, data: bytes | None, planned: set[str]) -> Workspace | None:
        """Return the checkpointed work repository if it can be continued, else ``None``."""
        if data is None:
            return None
        work = Workspace.hydrate(data, live.user_id, tmp_root=self.repos.tmp_root)
        reason = None
        tip = work.head() or ""
        if _root_trailers(work).get(REBUILD_WRITER) != self.engine.name:
            reason = "made by another writer engine"
        elif not set(_replayed(work)) <= planned:
            reason = "holds sessions no longer in the memory"
        elif git(["cat-file", "-e", f"{tip}^{{commit}}"], live.path, check=False).returncode == 0:
            reason = "already part of the memory"
        if reason is None:
            return work
        log.info("rebuild checkpoint discarded: %s", reason, extra={"user_id": live.user_id})
        work.close()
        return None

    def _checkpoint(self, key: str, work: Workspace, generation: int) -> int:
        try:
            return self.checkpoints.put(key, work.bundle(), if_generation_match=generation)
        except PreconditionFailed as exc:
            raise RebuildInterrupted(
                f"another rebuild of {work.user_id} wrote its checkpoint; run again"
            ) from exc

    def _finish(
        self, ws: Workspace, work: Workspace, done: list[str], key: str
    ) -> Outcome[tuple[str, str]]:
        """Catch up with sessions written meanwhile, then make ``M`` in ``ws`` (the live repo)."""
        live_tip = ws.head()
        if live_tip is None:
            raise NothingToRebuild(f"user {ws.user_id} was deleted during the rebuild")
        live_plan = archived_sessions(ws)
        if not set(done) <= {e.session_id for e in live_plan}:
            self.checkpoints.delete(key)
            raise RebuildInterrupted(
                f"a session of {ws.user_id} was reverted during the rebuild; run again"
            )
        for event in (e for e in live_plan if e.session_id not in set(done)):
            commit_session(work, self.engine, event)
            done.append(event.session_id)
        git(["fetch", "-q", "--no-tags", str(work.path), f"+refs/heads/{work.branch}:{_WORK_REF}"],
            ws.path)
        new_tip = git_text(["rev-parse", _WORK_REF], ws.path).strip()
        message = (
            f"Rebuild of {ws.user_id}'s memory: {len(done)} sessions replayed\n\n"
            f"The first parent is the replayed history; the second, {live_tip[:12]}, is the "
            "history it replaces.\n\n"
            f"{REBUILT_FROM}: {live_tip}\nRebuild-Sessions: {len(done)}\n"
            f"Writer: {self.engine.name}\n"
        )
        merge = git_text(
            ["commit-tree", f"{new_tip}^{{tree}}", "-p", new_tip, "-p", live_tip, "-F", "-"],
            ws.path, input=message.encode(),
        ).strip()
        git(["update-ref", f"refs/heads/{ws.branch}", merge, live_tip], ws.path)
        git(["update-ref", "-d", _WORK_REF], ws.path)
        git(["reset", "-q", "--hard", merge], ws.path)
        return Outcome((merge, live_tip))

