"""Read-only views of a user's memory for people and scripts: files, one file, blame by session.

Each function checks the user's memory out privately (nothing is saved) and returns plain data;
the CLI (``memrepo show``, ``memrepo blame``) prints it as text or JSON.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from memrepo.errors import PermanentError
from memrepo.gitcli import git, git_text
from memrepo.repos import UserRepos
from memrepo.workspace import Workspace


class NoMemory(PermanentError):
    """Raised when the user has no memory (no commit) in the store."""


class NoSuchPath(PermanentError):
    """Raised when a path is not a file of the user's memory at the requested revision."""


@dataclass(frozen=True)
class BlameLine:
    """One line of a file with the commit and session that last changed it.

    Attributes:
        line: 1-based line number in the current file.
        text: the line's text (no newline).
        commit: the commit that last changed it.
        session_id: that commit's ``Session-Id`` (``None`` for a revert, onboarding or rebuild).
        date: the commit's author date (ISO 8601; a session's ``occurred_at``).
    """

    line: int
    text: str
    commit: str
    session_id: str | None
    date: str


def _checkout(repos: UserRepos, user_id: str) -> Workspace:
    ws, _ = repos.checkout(user_id)
    if ws.head() is None:
        ws.close()
        raise NoMemory(f"user {user_id} has no memory in {repos.store.url}")
    return ws


def list_files(repos: UserRepos, user_id: str) -> list[str]:
    """Return the sorted paths of the user's memory files.

    Raises:
        NoMemory: the user has no memory.
    """
    with _checkout(repos, user_id) as ws:
        out = git_text(["ls-tree", "-r", "--name-only", "-z", ws.branch], ws.path)
        return sorted(p for p in out.split("\0") if p)


def read_file(repos: UserRepos, user_id: str, path: str, rev: str | None = None) -> str:
    """Return the text of ``path`` at the branch tip (or at ``rev``, e.g. ``HEAD~2``).

    Raises:
        NoMemory: the user has no memory. NoSuchPath: no such file (or revision).
    """
    with _checkout(repos, user_id) as ws:
        ws.resolve(path)  # refuses paths outside the repository
        spec = f"{rev or ws.branch}:{path}"
        proc = git(["show", spec], ws.path, check=False)
        if proc.returncode != 0:
            raise NoSuchPath(f"{path} is not in the memory of {user_id} at {rev or 'the tip'}")
        return proc.stdout.decode("utf-8", "replace")


def blame(repos: UserRepos, user_id: str, path: str) -> list[BlameLine]:
    """Return each line of ``path`` with the commit and session that last changed it.

    Raises:
        NoMemory: the user has no memory. NoSuchPath: no such file.
    """
    with _checkout(repos, user_id) as ws:
        ws.resolve(path)
        proc = git(["blame", "--porcelain", ws.branch, "--", path], ws.path, check=False)
        if proc.returncode != 0:
            raise NoSuchPath(f"{path} is not in the memory of {user_id}")
        sessions: dict[str, str] = {}
        log_out = git_text(
            ["log", "--format=%H%x1f%(trailers:key=Session-Id,valueonly)%x1e", ws.branch],
            ws.path,
        )
        for record in log_out.split("\x1e"):
            commit, _, sid = record.strip("\n").partition("\x1f")
            if commit and sid.strip():
                sessions[commit] = sid.strip()
        dates: dict[str, str] = {}
        rows: list[BlameLine] = []
        commit = ""
        final = 0
        author_time = author_tz = ""
        for raw in proc.stdout.decode("utf-8", "replace").split("\n"):
            if raw.startswith("\t"):
                if commit not in dates:
                    dates[commit] = _iso(author_time, author_tz)
                rows.append(BlameLine(final, raw[1:], commit, sessions.get(commit), dates[commit]))
                continue
            fields = raw.split(" ")
            if len(fields) >= 3 and len(fields[0]) == 40 and fields[1].isdigit():
                commit, final = fields[0], int(fields[2])
            elif fields[0] == "author-time":
                author_time = fields[1]
            elif fields[0] == "author-tz":
                author_tz = fields[1]
        return rows


def _iso(epoch: str, tz: str) -> str:
    """Return the ISO 8601 time of a blame ``author-time`` (Unix s) and ``author-tz`` (+HHMM)."""
    if not epoch:
        return ""
    minutes = int(tz[1:3] or 0) * 60 + int(tz[3:5] or 0) if len(tz) == 5 else 0
    offset = timedelta(minutes=-minutes if tz.startswith("-") else minutes)
    return datetime.fromtimestamp(int(epoch), timezone(offset)).isoformat()
