"""Files changed together with given files: which paths each commit touched, cached per head.

The deterministic engine boosts lines of files that were changed in the same commits as the
entities a conversation mentions. Asking ``git log --name-only --full-diff -N -- <paths>`` per
request walks and diffs the history every time (~30 ms at 1,000 sessions, ten times that at
10,000). Here the history is read once per commit at the tip and kept: a :class:`CommitLog`
lists the paths each commit of the tip's first-parent chain touched (``git log --first-parent
--name-only --no-renames``; a rebuild's merge commit has the rebuilt lineage as first parent and
its tree, so, as with the path-limited ``git log`` before, the replaced lineage does not count)
and which commits touched each path. When the tip moves forward on that chain (another session
stored), only the new commits are read (``git log --first-parent OLD..NEW``, whose oldest commit
must have OLD as first parent, else the history is read whole) and the new log shares the
unchanged index lists with the old one: one git call of O(new sessions) plus a copy of the
path table.

Logs are kept in a small process-wide LRU (:data:`MAX_LOGS` tips); commit ids name immutable
histories, so an entry can never be stale. Safe with concurrent requests (one lock around the
table; logs are never mutated once published).
"""

from __future__ import annotations

import heapq
import sys
import threading
from array import array
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memrepo.gitcli import git_text

#: Tips whose logs are kept per process (each ~4 MB at 10,000 sessions, ~0.4 MB at 1,000).
MAX_LOGS = 4
#: Most recent commits touching the given files that count as "changed together".
DEFAULT_WINDOW = 200
_MARK = "\x00commit "


@dataclass(frozen=True)
class CommitLog:
    """Paths touched per commit up to ``head``, oldest first, and the reverse map.

    Attributes:
        head: the commit id the log ends at.
        commits: for commit ``i`` (0 = the oldest), the paths it touched.
        touching: path → indices into ``commits`` of the commits that touched it, ascending
            (``array('i')``; paths are interned, so a path touched by many commits is one string).
    """

    head: str
    commits: tuple[tuple[str, ...], ...]
    touching: Mapping[str, array[int]]

    def changed_with(self, paths: Iterable[str], window: int = DEFAULT_WINDOW) -> set[str]:
        """Return every path touched by the ``window`` newest commits that touched any of ``paths``.

        ``git log --format= --name-only --full-diff -<window> -- <paths>`` on a linear history.
        """
        indices = {i for p in paths for i in self.touching.get(p, ())}
        newest = heapq.nlargest(window, indices)
        return {path for i in newest for path in self.commits[i]}

    def extended(self, new_head: str, newer: list[tuple[str, ...]]) -> CommitLog:
        """Return the log at ``new_head``: this one plus ``newer`` (oldest first); self unchanged.

        Index lists of paths the new commits did not touch are shared with this log, not copied
        (the path table and the commit tuple are copied: cheap, but O(history)).
        """
        touching = dict(self.touching)
        added: dict[str, list[int]] = {}
        for offset, files in enumerate(newer):
            for path in files:
                added.setdefault(path, []).append(len(self.commits) + offset)
        for path, indices in added.items():
            touching[path] = touching.get(path, array("i")) + array("i", indices)
        return CommitLog(new_head, (*self.commits, *newer), touching)


def _read(
    repo: Path, revisions: str, *, check: bool = True
) -> tuple[list[tuple[str, ...]], str | None]:
    """Read the first-parent history of ``revisions`` (one git call).

    With ``check=False`` a range git cannot resolve (a tip this repository does not have) reads
    as empty, so the caller reads the history whole instead.

    Returns:
        The paths each commit touched, oldest first, and the first parent of the oldest commit
        listed (``None`` for a root commit or an empty range).
    """
    out = git_text(["log", "--first-parent", "--format=%x00commit %H %P", "--name-only",
                    "--no-renames", "--no-color", revisions, "--"], repo, check=check)
    commits: list[tuple[str, ...]] = []
    oldest_parent: str | None = None
    for chunk in out.split(_MARK)[1:]:
        lines = chunk.split("\n")
        ids = lines[0].split()
        oldest_parent = ids[1] if len(ids) > 1 else None
        commits.append(tuple(dict.fromkeys(sys.intern(p) for p in lines[1:] if p)))
    commits.reverse()
    return commits, oldest_parent


def _build(head: str, commits: list[tuple[str, ...]]) -> CommitLog:
    touching: dict[str, list[int]] = {}
    for i, files in enumerate(commits):
        for path in files:
            touching.setdefault(path, []).append(i)
    return CommitLog(head, tuple(commits), {p: array("i", ix) for p, ix in touching.items()})


class CommitLogCache:
    """Process-wide :class:`CommitLog` per tip, extended incrementally when a tip moves forward."""

    def __init__(self, max_logs: int = MAX_LOGS) -> None:
        """Keep at most ``max_logs`` logs (least recently used dropped first)."""
        self.max_logs = max_logs
        self._logs: OrderedDict[str, CommitLog] = OrderedDict()
        self._last: dict[str, str] = {}  # repository path -> tip of its last log
        self._lock = threading.Lock()
        #: ``full`` reads of the whole history, ``extended`` incremental reads, ``hits``.
        self.stats = {"full": 0, "extended": 0, "hits": 0}

    def log(self, repo: Path, head: str) -> CommitLog:
        """Return the log of ``repo``'s history up to commit ``head``.

        Raises:
            GitError: git could not read the history.
        """
        key = str(repo)
        with self._lock:
            found = self._logs.get(head)
            if found is not None:
                self._logs.move_to_end(head)
                self.stats["hits"] += 1
                self._last.pop(key, None)  # most recently used last
                self._last[key] = head
                return found
            base = self._logs.get(self._last.get(key, ""))
        log: CommitLog | None = None
        kind = "full"
        if base is not None:  # the tip moved: read the new commits only, if it moved forward
            newer, parent = _read(repo, f"{base.head}..{head}", check=False)
            if newer and parent == base.head:  # base is on the new tip's first-parent chain
                log, kind = base.extended(head, newer), "extended"
            elif newer and parent is None:  # reached a root: the whole chain (after a rebuild)
                log = _build(head, newer)
        if log is None:
            log = _build(head, _read(repo, head)[0])
        with self._lock:
            self.stats[kind] += 1
            self._logs[head] = log
            self._logs.move_to_end(head)
            while len(self._logs) > self.max_logs:
                self._logs.popitem(last=False)
            self._last.pop(key, None)
            self._last[key] = head
            if len(self._last) > 4 * self.max_logs:
                self._last.pop(next(iter(self._last)))
        return log


#: The cache the deterministic engine uses.
LOGS = CommitLogCache()
