"""Revert one session: undo its commit as a new commit, or refuse without changing anything.

``revert(user, session_id)`` finds the session's commit on the current lineage (``git log
--first-parent``, by its ``Session-Id:`` trailer), runs ``git revert --no-commit`` on it, settles
the files git leaves conflicted with :mod:`memrepo.operations.revert_merge` (append-only entries
and derived front-matter fields), regenerates ``index.md`` from the entity files
(:func:`memrepo.index.render`), and commits once with the trailers::

    Reverts-Session: <session id>
    Reverts-Commit: <sha of the session's commit>

The commit removes everything the session added (its transcript, its timeline entry, its lines
in person files and the profile, files it created) and keeps what other sessions wrote. When a
later session changed the very lines or fields the revert must change (or edited a file the
session created and that names it nowhere), the revert is refused with :class:`RevertConflict`
and nothing is saved.

Saving uses :class:`~memrepo.operations.apply.RepoChanger` (generation precondition, re-applied
on the newer state after a lost race). Reverting twice is a no-op (``already-reverted``). A
redelivery of a reverted session stays a ``duplicate``: its original commit is still in history.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal

from memrepo import index
from memrepo.errors import PermanentError
from memrepo.gitcli import git, git_text
from memrepo.ids import validate_session_id
from memrepo.layout import INDEX
from memrepo.operations.apply import Outcome, RepoChanger
from memrepo.operations.revert_merge import (
    Unresolved,
    revert_created,
    revert_text,
    revert_timeline,
)
from memrepo.workspace import Workspace

log = logging.getLogger(__name__)

REVERTS_SESSION = "Reverts-Session"
REVERTS_COMMIT = "Reverts-Commit"


class SessionNotFound(PermanentError):
    """Raised when the session to revert has no commit on the user's current lineage."""


class RevertConflict(PermanentError):
    """Raised when later commits changed lines the revert must change; nothing was saved."""


@dataclass(frozen=True)
class RevertResult:
    """The outcome of :func:`revert`.

    Attributes:
        status: ``reverted`` (a commit was saved) or ``already-reverted`` (nothing to do).
        user_id: the user.
        session_id: the reverted session.
        reverted_commit: the session's commit.
        commit: the revert commit (new or found).
        generation: the store token after the save (or as read).
        attempts: save rounds used.
        merged: files settled by the finer merge after git reported a conflict.
        changed: ``git diff --name-status`` lines of the revert commit.
    """

    status: Literal["reverted", "already-reverted"]
    user_id: str
    session_id: str
    reverted_commit: str
    commit: str
    generation: int
    attempts: int
    merged: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()


def lineage_trailer(ws: Workspace, key: str, value: str) -> str | None:
    """Return the newest commit on the first-parent lineage whose trailer ``key`` is ``value``."""
    if ws.head() is None:
        return None
    fmt = f"%H%x1f%(trailers:key={key},valueonly,separator=%x1f)%x1e"
    out = git_text(
        ["log", "--first-parent", "-F", f"--grep={key}: {value}", f"--format={fmt}", ws.branch],
        ws.path,
    )
    for record in out.split("\x1e"):
        commit, _, values = record.strip("\n").partition("\x1f")
        if commit and value in [v.strip() for v in values.split("\x1f")]:
            return commit
    return None


def _unmerged(ws: Workspace) -> dict[str, set[int]]:
    """Return the conflicted paths and the stages git has for each (1 base, 2 ours, 3 theirs)."""
    stages: dict[str, set[int]] = {}
    for entry in git_text(["ls-files", "-u", "-z"], ws.path).split("\0"):
        if entry:
            meta, _, path = entry.partition("\t")
            stages.setdefault(path, set()).add(int(meta.split()[2]))
    return stages


def _settle(
    ws: Workspace, stages: dict[str, set[int]], session_id: str
) -> tuple[list[str], list[str]]:
    """Resolve the conflicted files; return ``(merged paths, problems)``."""
    merged: list[str] = []
    problems: list[str] = []
    for path, have in sorted(stages.items()):
        if path == INDEX:
            continue
        if have not in ({1, 2, 3}, {1, 2}):
            problems.append(f"{path}: the session deleted it and a later commit changed it")
            continue
        base, ours = (git_text(["show", f":{n}:{path}"], ws.path) for n in (1, 2))
        text: str | None
        try:
            if have == {1, 2}:
                text = revert_created(path, base, ours, session_id)
            elif path.startswith("timeline/"):
                text = revert_timeline(base, ours, session_id, created=False)
            else:
                text = revert_text(base, git_text(["show", f":3:{path}"], ws.path), ours)
        except Unresolved as exc:
            problems.append(f"{path}: {exc}")
            continue
        if text is None:
            git(["rm", "-q", "-f", "--", path], ws.path)
        else:
            ws.write(path, text)
            git(["add", "--", path], ws.path)
        merged.append(path)
    return merged, problems


def _regenerate_index(ws: Workspace) -> None:
    entity_files = {p: ws.read(p) or "" for p in ws.files("memories/")}
    if entity_files or ws.read(INDEX) is not None:
        ws.write(INDEX, index.render(entity_files))
        git(["add", "--", INDEX], ws.path)


def revert(changer: RepoChanger, user_id: str, session_id: str) -> RevertResult:
    """Undo session ``session_id`` of ``user_id`` as one new, saved commit.

    Args:
        changer: applies and saves the change with the generation precondition.
        user_id: the user.
        session_id: the session to undo (validated).

    Returns:
        The :class:`RevertResult` (``already-reverted`` when a revert of it is on the lineage).

    Raises:
        SessionNotFound: no commit of that session on the current lineage (permanent).
        RevertConflict: later commits changed the same lines (permanent; nothing saved).
        ConflictRetriesExhausted, StoreUnavailable, GitError: transient failures.
    """
    validate_session_id(session_id)

    def change(ws: Workspace) -> Outcome[RevertResult]:
        target = lineage_trailer(ws, "Session-Id", session_id)
        if target is None:
            raise SessionNotFound(
                f"user {user_id} has no commit of session {session_id} in the current history"
            )
        done = lineage_trailer(ws, REVERTS_SESSION, session_id)
        if done is not None:
            return Outcome(
                RevertResult("already-reverted", user_id, session_id, target, done, 0, 0),
                save=False,
            )
        proc = git(["revert", "--no-commit", "--no-edit", target], ws.path, check=False)
        merged: list[str] = []
        if proc.returncode != 0:
            stages = _unmerged(ws)
            if not stages:
                raise RevertConflict(
                    f"git revert of session {session_id} ({target[:12]}) failed: "
                    f"{proc.stderr.decode('utf-8', 'replace').strip()[:300]}"
                )
            merged, problems = _settle(ws, stages, session_id)
            if problems:
                git(["revert", "--abort"], ws.path, check=False)
                raise RevertConflict(
                    f"cannot revert session {session_id} of {user_id} ({target[:12]}): later "
                    "sessions changed the same lines; nothing was changed. "
                    + "; ".join(problems)
                )
        _regenerate_index(ws)
        subject = git_text(["log", "-1", "--format=%s", target], ws.path).strip()
        commit = ws.commit(
            f"Revert session {session_id}\n\nReverts \"{subject}\".",
            {REVERTS_SESSION: session_id, REVERTS_COMMIT: target},
        )
        git(["revert", "--quit"], ws.path, check=False)
        changed = git_text(["diff", "--name-status", f"{commit}~1", commit], ws.path).splitlines()
        return Outcome(
            RevertResult("reverted", user_id, session_id, target, commit, 0, 0,
                         tuple(merged), tuple(changed))
        )

    applied = changer.apply(
        user_id, change, what=f"revert of session {session_id} of {user_id}",
        log_extra={"session_id": session_id},
    )
    result = applied.value
    log.info(
        "session %s", result.status,
        extra={"user_id": user_id, "session_id": session_id, "commit": result.commit,
               "reverted_commit": result.reverted_commit, "attempts": applied.attempts},
    )
    return RevertResult(
        result.status, user_id, session_id, result.reverted_commit, result.commit, applied.token,
        applied.attempts, result.merged, result.changed,
    )
