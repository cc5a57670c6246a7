"""A user's memory repository hydrated into a private temporary directory.

A :class:`Workspace` is created from a bundle (or empty, for a new user), read and changed through
its methods, committed once per session, bundled again, and removed when closed. Git runs through
:mod:`memrepo.gitcli` (hardened environment). One branch, ``user/<user_id>``, with no shared
history: a new user's first commit is a root commit, and a bundle holding any other ref is refused.

Git facts relied on (git-bundle(1)): ``git bundle create`` refuses an empty range; ``git bundle
verify`` checks a bundle's prerequisites and format; ``git bundle list-heads`` lists its refs.

Workspaces made by :class:`~memrepo.repocache.RepoCache` may be *lean* or *shared*:

* lean (``lazy_prefixes``): files under those prefixes (``sessions/`` and ``timeline/``, which grow
  with the history)
  are in the index with the skip-worktree bit (git-update-index(1) "SKIP-WORKTREE BIT") instead of
  on disk; :meth:`Workspace.read` reads them from the index, and :meth:`Workspace.commit` stages
  exactly the files written through :meth:`Workspace.write` (inside the prefixes or not) with one
  ``git update-index --index-info``. Creating one costs O(files outside the prefixes), not
  O(sessions).
* shared (``read_only``): a full checkout several readers use at once; :meth:`write` and
  :meth:`commit` refuse.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from memrepo.errors import CorruptBundle, GitError
from memrepo.gitcli import git, git_text
from memrepo.ids import branch_for

log = logging.getLogger(__name__)

_SHA1 = re.compile(r"[0-9a-f]{40}")
_ZERO = "0" * 40


def _clean_message(text: str) -> str:
    """Clean a commit message like ``git commit --cleanup=whitespace`` (git-stripspace(1)):
    trailing whitespace removed, runs of blank lines collapsed, none at either end."""
    lines: list[str] = []
    for line in text.splitlines():
        line = line.rstrip()
        if line or (lines and lines[-1]):
            lines.append(line)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class CommittedSession:
    """A session already in the history: its commit and the digest recorded in its trailer."""

    commit: str
    digest: str | None


class PathOutsideRepo(ValueError):
    """Raised when a relative path would leave the repository (``..``, absolute, ``.git``)."""


class ReadOnlyWorkspace(PermissionError):
    """Raised when :meth:`Workspace.write` or :meth:`Workspace.commit` is called on a view."""


#: ``git log`` format of :func:`parse_session_log`: commit, Session-Id values, Session-Digest.
SESSION_LOG_FORMAT = (
    "%H%x1f%(trailers:key=Session-Id,valueonly,separator=%x1f)%x1f%x1f"
    "%(trailers:key=Session-Digest,valueonly)%x1e"
)


def parse_session_log(out: str) -> list[tuple[list[str], CommittedSession]]:
    """Parse ``git log --format=SESSION_LOG_FORMAT`` output into ``(session ids, commit)`` rows.

    Rows keep git's order (newest first for ``git log``).
    """
    rows = []
    for record in out.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        commit, rest = record.split("\x1f", 1)
        ids_part, _, digest = rest.partition("\x1f\x1f")
        ids = [x.strip() for x in ids_part.split("\x1f") if x.strip()]
        rows.append((ids, CommittedSession(commit=commit, digest=digest.strip() or None)))
    return rows


class Workspace:
    """A hydrated checkout of one user's branch. Use as a context manager; see module docstring."""

    def __init__(
        self,
        path: Path,
        user_id: str,
        *,
        owns_dir: bool = True,
        read_only: bool = False,
        lazy_prefixes: Sequence[str] = (),
        sessions: Mapping[str, CommittedSession] | None = None,
        on_close: Callable[[], None] | None = None,
    ) -> None:
        """Use :meth:`create`, :meth:`hydrate` or a :class:`~memrepo.repos.UserRepos` instead.

        Args:
            path: the work tree (its ``.git`` inside).
            user_id: the owner; the branch is ``user/<user_id>``.
            owns_dir: remove ``path`` on :meth:`close`.
            read_only: refuse :meth:`write` and :meth:`commit` (a view shared by readers).
            lazy_prefixes: path prefixes kept in the index only (see the module docstring).
            sessions: session id → commit of every session at the current head, so
                :meth:`find_session` needs no ``git log`` until the next :meth:`commit`.
            on_close: called once by :meth:`close` (a cache releases its pin).
        """
        self.path = path
        self.user_id = user_id
        self.branch = branch_for(user_id)
        self.read_only = read_only
        self.lazy_prefixes = tuple(lazy_prefixes)
        #: Set by the :class:`~memrepo.repos.UserRepos` that produced this workspace.
        self.origin: Any = None
        self._owns_dir = owns_dir
        self._sessions = sessions
        self._on_close = on_close
        self._closed = False
        self._root: str | None = None
        self._base_of_commits: str | None = None
        self._made: list[tuple[str, dict[str, str]]] = []
        #: Paths written through :meth:`write` (repository-relative).
        self.written: set[str] = set()

    # -- lifecycle ---------------------------------------------------------------------------

    @classmethod
    def create(cls, user_id: str, *, tmp_root: Path | None = None) -> Workspace:
        """Create an empty repository whose unborn branch is ``user/<user_id>``.

        Raises:
            InvalidEvent: the user id is invalid.
            GitError: git failed.
        """
        branch = branch_for(user_id)
        path = Path(tempfile.mkdtemp(prefix="memrepo-", dir=tmp_root))
        ws = cls(path, user_id)
        try:
            git(["init", "-q", f"--initial-branch={branch}", "."], path)
        except BaseException:
            ws.close()
            raise
        return ws

    @classmethod
    def hydrate(
        cls, bundle: bytes | None, user_id: str, *, tmp_root: Path | None = None
    ) -> Workspace:
        """Return a checkout of ``user/<user_id>`` from ``bundle`` (a new repo when ``None``).

        Raises:
            CorruptBundle: the bundle fails ``git bundle verify`` or holds another ref.
            GitError: git failed otherwise.
        """
        ws = cls.create(user_id, tmp_root=tmp_root)
        if bundle is None:
            return ws
        try:
            bundle_file = ws.path / ".git" / "incoming.bundle"
            bundle_file.write_bytes(bundle)
            ws._fetch_bundle(bundle_file)
            bundle_file.unlink()
            git(["checkout", "-q", "-f", ws.branch], ws.path)
        except BaseException:
            ws.close()
            raise
        return ws

    def _fetch_bundle(self, bundle_file: Path) -> None:
        ref = f"refs/heads/{self.branch}"
        verify = git(["bundle", "verify", "-q", str(bundle_file)], self.path, check=False)
        if verify.returncode != 0:
            raise CorruptBundle(
                f"bundle of {self.user_id} fails verification: "
                f"{verify.stderr.decode('utf-8', 'replace').strip()[:300]}"
            )
        heads = git_text(["bundle", "list-heads", str(bundle_file)], self.path).split()
        refs = {h for h in heads if h.startswith("refs/")}
        if refs != {ref}:
            raise CorruptBundle(f"bundle of {self.user_id} holds refs {sorted(refs)}, not [{ref}]")
        git(
            ["fetch", "-q", "--no-tags", "--update-head-ok", str(bundle_file), f"+{ref}:{ref}"],
            self.path,
        )

    def close(self) -> None:
        """Remove the temporary directory and release what it holds (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._owns_dir:
                shutil.rmtree(self.path, ignore_errors=True)
        finally:
            if self._on_close is not None:
                self._on_close()

    def __enter__(self) -> Workspace:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- reading -----------------------------------------------------------------------------

    def head(self) -> str | None:
        """Return the commit id at the branch tip, or ``None`` for a repository with no commit.

        Reads the loose ref or ``packed-refs`` (gitrepository-layout(5)) without starting git;
        anything unusual (a symbolic ref, a ``.git`` file) is left to ``git rev-parse``.
        """
        ref = f"refs/heads/{self.branch}"
        git_dir = self.path / ".git"
        if git_dir.is_dir():
            try:
                value = (git_dir / ref).read_text().strip()
                if _SHA1.fullmatch(value):
                    return value
            except FileNotFoundError:
                packed = git_dir / "packed-refs"
                if not packed.exists():
                    return None
                for line in packed.read_text().splitlines():
                    sha, _, name = line.partition(" ")
                    if name == ref and _SHA1.fullmatch(sha):
                        return sha
                return None
            except (OSError, UnicodeDecodeError):
                pass
        proc = git(["rev-parse", "-q", "--verify", ref], self.path, check=False)
        return proc.stdout.decode().strip() or None

    def appended_commits(self, base: str) -> list[tuple[str, dict[str, str]]] | None:
        """Return ``(commit, trailers)`` of every :meth:`commit` made here on top of ``base``.

        ``None`` unless the branch was at ``base`` before the first :meth:`commit` and is still at
        the last one (nothing else moved it), so the commits are exactly ``base..head``.
        """
        if self._base_of_commits != base or not self._made:
            return None
        return list(self._made) if self.head() == self._made[-1][0] else None

    def resolve(self, relpath: str) -> Path:
        """Return the absolute path of ``relpath`` inside the repository.

        Raises:
            PathOutsideRepo: ``relpath`` is absolute, climbs out with ``..``, or enters ``.git``.
        """
        parts = Path(relpath).parts
        if (
            not relpath
            or Path(relpath).is_absolute()
            or ".." in parts
            or (parts and parts[0] == ".git")
        ):
            raise PathOutsideRepo(f"path {relpath!r} is outside the repository")
        full = self.path / relpath
        root = self._real_root()
        current = root
        for part in parts:  # lstat only inside the repository; realpath only past a symlink
            current = os.path.join(current, part)
            try:
                mode = os.lstat(current).st_mode
            except (FileNotFoundError, NotADirectoryError):
                break  # what does not exist cannot be a link
            if stat.S_ISLNK(mode):
                if not os.path.realpath(full).startswith(root + os.sep):
                    raise PathOutsideRepo(f"path {relpath!r} resolves outside the repository")
                break
        return full

    def _real_root(self) -> str:
        if self._root is None:
            self._root = os.path.realpath(self.path)
        return self._root

    def read(self, relpath: str) -> str | None:
        """Return the text of a file in the working tree, or ``None`` if it does not exist.

        In a lean workspace a path under ``lazy_prefixes`` that is not on disk is read from the
        index (``git cat-file blob :<path>``).
        """
        try:
            return self.resolve(relpath).read_text(encoding="utf-8")
        except FileNotFoundError:
            if not self.lazy_prefixes or not relpath.startswith(self.lazy_prefixes):
                return None
        proc = git(["cat-file", "blob", f":{relpath}"], self.path, check=False)
        return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else None

    def files(self, prefix: str = "") -> list[str]:
        """Return the sorted tracked file paths under ``prefix`` (``git ls-files``)."""
        if self.head() is None:
            return []
        out = git_text(["ls-files", "-z", "--", prefix or "."], self.path)
        return sorted(p for p in out.split("\0") if p)

    def find_session(self, session_id: str) -> CommittedSession | None:
        """Return the commit whose ``Session-Id:`` trailer is ``session_id``, if any.

        Uses the session map the workspace was created with when it has one (O(1)); otherwise
        ``git log --grep`` to narrow, then the parsed trailers (git-interpret-trailers(1)) to
        match exactly (O(history)).
        """
        if self._sessions is not None:
            return self._sessions.get(session_id)
        if self.head() is None:
            return None
        out = git_text(
            [
                "log",
                "-F",
                f"--grep=Session-Id: {session_id}",
                f"--format={SESSION_LOG_FORMAT}",
                self.branch,
            ],
            self.path,
        )
        for ids, found in parse_session_log(out):
            if session_id in ids:
                return found
        return None

    # -- writing -----------------------------------------------------------------------------

    def write(self, relpath: str, text: str) -> None:
        """Write ``text`` (UTF-8) to ``relpath``, creating folders.

        Raises:
            PathOutsideRepo: the path is outside the repository.
            ReadOnlyWorkspace: the workspace is a shared read-only view.
        """
        if self.read_only:
            raise ReadOnlyWorkspace(f"{self.path} is a read-only view; {relpath!r} not written")
        full = self.resolve(relpath)
        self.written.add(relpath)
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_text(text, encoding="utf-8")

    def commit(
        self, message: str, trailers: dict[str, str], *, author_date: datetime | None = None
    ) -> str:
        """Stage everything and make one commit; return its id.

        Args:
            message: subject (first line) and optional body.
            trailers: ``Key: value`` lines appended as git trailers (git-interpret-trailers(1)).
            author_date: the session's time, recorded as the author date.

        Raises:
            GitError: nothing to commit, or git failed.
            ReadOnlyWorkspace: the workspace is a shared read-only view.
        """
        if self.read_only:
            raise ReadOnlyWorkspace(f"{self.path} is a read-only view; nothing committed")
        self._sessions = None  # the map describes the old head only
        before = self.head()
        if not self._made:
            self._base_of_commits = before
        elif before != self._made[-1][0]:
            self._base_of_commits = None  # moved by something else: no longer a plain append
        if self.lazy_prefixes:
            self._stage_written()
        else:
            git(["add", "-A", "."], self.path)
        body = message.strip() + "\n\n" + "\n".join(f"{k}: {v}" for k, v in trailers.items()) + "\n"
        env = {"GIT_AUTHOR_DATE": author_date.isoformat()} if author_date else None
        # Plumbing instead of `git commit`, which refreshes every index entry (an lstat per
        # skip-worktree file of a lean workspace): write-tree reuses the cache-tree, commit-tree
        # takes the message as `git commit -F` would clean it (git-stripspace(1), whitespace mode)
        tree = git_text(["write-tree"], self.path).strip()
        parents = ["-p", before] if before else []
        head = git_text(["commit-tree", tree, *parents], self.path, env=env,
                        input=_clean_message(body).encode()).strip()
        git(["update-ref", f"refs/heads/{self.branch}", head, before or _ZERO], self.path)
        if self.head() != head or head == before:
            raise GitError("commit produced no head")
        self._made.append((head, dict(trailers)))
        return head

    def _stage_written(self) -> None:
        """Stage exactly the paths written through :meth:`write` (a lean workspace changes only so).

        ``git hash-object -w --stdin-paths`` stores their blobs and one ``git update-index
        --index-info`` records them (git-update-index(1) "USING --INDEX-INFO"): the index, which
        holds an entry per transcript of the whole history, is read and rewritten once, not by
        ``git add -A`` scanning it too. Recorded entries lose the skip-worktree bit, as they are
        on disk now; every file is recorded as a regular, non-executable file (mode 100644), as
        :meth:`write` makes them. (``update-index --add --remove`` would not do: it drops a
        skip-worktree entry whose file it is given instead of updating it.)

        Raises:
            GitError: git failed, or a written path is now a symbolic link.
        """
        written = sorted(self.written)
        for path in written:  # write() makes regular files; anything else is not staged blind
            if os.path.islink(self.resolve(path)):
                raise GitError(f"{path} became a symbolic link after it was written; not staged")
        present = [p for p in written if self.resolve(p).is_file()]
        shas = git_text(["hash-object", "-w", "--stdin-paths"], self.path,
                        input="".join(f"{p}\n" for p in present).encode()).split()
        if len(shas) != len(present):
            raise GitError(f"hash-object returned {len(shas)} ids for {len(present)} files")
        info = dict(zip(present, (f"100644 {sha}" for sha in shas), strict=True))
        rows = [f"{info.get(p, f'0 {_ZERO}')}\t{p}\0" for p in written]
        git(["update-index", "-z", "--index-info"], self.path, input="".join(rows).encode())

    def bundle(self) -> bytes:
        """Return a verified bundle of the user's branch (all of its history).

        Raises:
            GitError: the repository has no commit, or ``git bundle`` failed.
            CorruptBundle: the bundle written fails ``git bundle verify``.
        """
        if self.head() is None:
            raise GitError(f"cannot bundle {self.branch}: it has no commit")
        out = self.path / ".git" / "outgoing.bundle"
        git(["bundle", "create", "-q", str(out), f"refs/heads/{self.branch}"], self.path)
        verify = git(["bundle", "verify", "-q", str(out)], self.path, check=False)
        if verify.returncode != 0:
            raise CorruptBundle(f"bundle just written fails verification: {verify.stderr[:300]!r}")
        data = out.read_bytes()
        out.unlink()
        return data
