"""Warm-instance cache of hydrated user repositories, in a local directory (``/tmp``).

A serverless instance serves many requests; downloading and unbundling a user's whole history
for each one costs O(history). This cache keeps, per user, a bare repository with the branch at
the last manifest tip seen, and hands out *private* workspaces that borrow its objects
(gitrepository-layout(5) ``objects/info/alternates``) instead of copying them.

Freshness: the caller always reads the manifest from the store first and passes it in; the cache
compares the manifest's tip with its own and, when they differ, downloads only the parts whose tip
it does not hold (usually the newest increment or two), so it can never serve a state other than
the one the manifest names (keys are commit ids: content-addressed).

Per user entry (``<root>/p<pid>-*/<store hash>/<user_id>.<n>/``)::

    repo.git/       bare repository: every object of the user, ``refs/heads/user/<id>`` at ``tip``
    writer.index    the index of ``tip`` with the skip-worktree bit on ``sessions/`` and
                    ``timeline/`` (lean writers)
    view/           a full checkout of ``tip`` shared by concurrent readers (read-only)

plus, in memory, ``session id → commit`` of every session at ``tip``, so the writer's idempotency
check needs no ``git log`` over the history.

Workspaces handed out:

* writers (:meth:`RepoCache.writable`): a new directory with its own ``.git`` (``HEAD``, ref, a
  copy of ``writer.index``, alternates to ``repo.git``), checked out except ``sessions/`` and
  ``timeline/`` (both grow with history; a writer reads one month of the timeline, through the
  index) — cost O(profile, index and entity files), never shared;
* readers (:meth:`RepoCache.readable`): the entry's ``view``, moved to ``tip`` in place (O(changed
  files)) when no reader is using it, else a private full checkout for this request.

Concurrency: one ``threading.Lock`` per entry serialises syncing; a pin count per entry keeps its
objects (and a reader count its view) alive while workspaces use them; eviction only removes
unpinned entries. The cache root is private to the process (``p<pid>-*``, a flock held while the
process lives); roots of dead processes are removed by the next process that opens the cache.

Size: entries are evicted least recently used until the total (``repo.git``, ``writer.index``,
``view``) is at most ``max_bytes``. Cloud Functions' ``/tmp`` is memory
(https://cloud.google.com/functions/docs/concepts/execution-environment#memory-file-system), so
the bound counts against the instance's memory; a pinned entry may exceed it until released.
"""

from __future__ import annotations

import fcntl
import hashlib
import itertools
import logging
import os
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import IO, Any

from memrepo.chain import fetch_parts, is_ancestor, make_git_dir
from memrepo.errors import GitError
from memrepo.gitcli import git, git_text
from memrepo.ids import branch_for
from memrepo.manifest import Manifest, Part
from memrepo.store.base import BundleStore
from memrepo.workspace import (
    SESSION_LOG_FORMAT,
    CommittedSession,
    Workspace,
    parse_session_log,
)

log = logging.getLogger(__name__)

#: Prefixes writers get in the index only: the append-only event log and the monthly timeline,
#: the two parts of a repository that grow with the number of sessions.
DEFAULT_LAZY_PREFIXES = ("sessions/", "timeline/")
_ZERO = "0" * 40
#: Loose objects (about 15 per absorbed write) an idle entry may hold before it is repacked.
_REPACK_AT_LOOSE = 1024


@dataclass(eq=False)
class _View:
    path: Path
    tip: str
    readers: int = 0
    bytes: int = 0


@dataclass(eq=False)
class _Entry:
    key: tuple[str, str]
    path: Path
    user_id: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    tip: str | None = None
    generation: int = 0
    known: set[str] = field(default_factory=set)
    sessions: Mapping[str, CommittedSession] = field(default_factory=dict)
    pins: int = 0
    view: _View | None = None
    bytes: int = 0
    last_used: float = 0.0
    evicted: bool = False
    loose: int = 0

    @property
    def repo(self) -> Path:
        return self.path / "repo.git"

    @property
    def ref(self) -> str:
        return f"refs/heads/{branch_for(self.user_id)}"

    def index_env(self) -> dict[str, str]:
        return {"GIT_INDEX_FILE": str(self.path / "writer.index"),
                "GIT_WORK_TREE": str(self.path / "empty")}


def _tree_bytes(path: Path, *, skip: Path | None = None) -> int:
    total = 0
    for dirpath, dirnames, filenames in os.walk(path):
        if skip is not None and Path(dirpath) == skip.parent and skip.name in dirnames:
            dirnames.remove(skip.name)
        for name in filenames:
            try:
                total += os.lstat(os.path.join(dirpath, name)).st_size
            except FileNotFoundError:
                continue
    return total


class RepoCache:
    """A bounded, thread-safe cache of user repositories (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        max_bytes: int,
        *,
        lazy_prefixes: Sequence[str] = DEFAULT_LAZY_PREFIXES,
        repack_at_packs: int = 16,
    ) -> None:
        """Open a cache under ``root`` (created if missing).

        Args:
            root: the cache directory (``MEMREPO_CACHE_DIR``); this process uses a private
                subdirectory of it.
            max_bytes: the size bound in bytes (``MEMREPO_CACHE_MAX_BYTES``); 0 keeps nothing
                once released.
            lazy_prefixes: paths writers get in the index only (see :class:`Workspace`).
            repack_at_packs: merge packs (``git repack --geometric=2 -d``) of an unused entry
                when it holds more than this many (one pack is added per part applied).

        Raises:
            OSError: ``root`` cannot be created.
        """
        root.mkdir(parents=True, exist_ok=True)
        self._sweep(root)
        name = f"p{os.getpid()}-{secrets.token_hex(6)}"
        # the lock file appears under its final name only once locked, so a concurrent sweep
        # (another cache, another process) never takes a cache being opened for a dead one
        pending = root / f".{name}.alive"
        self._alive: IO[bytes] | None = open(pending, "wb")  # noqa: SIM115
        fcntl.flock(self._alive, fcntl.LOCK_EX)
        os.replace(pending, root / f"{name}.alive")
        self.root = root / name
        self.root.mkdir()
        self.max_bytes = max_bytes
        self.lazy_prefixes = tuple(lazy_prefixes)
        self.repack_at_packs = repack_at_packs
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, str], _Entry] = {}
        self._serial = itertools.count(1)
        #: Counters for logs and benchmarks: hits, syncs, cold, downloaded_bytes, evictions.
        self.stats: dict[str, int] = {"hits": 0, "syncs": 0, "cold": 0, "downloaded_bytes": 0,
                                      "evictions": 0, "private_views": 0, "absorbed": 0}

    # -- public --------------------------------------------------------------------------------

    def writable(
        self, store: BundleStore, manifest: Manifest, generation: int, *,
        tmp_root: Path | None, lean: bool = True,
    ) -> Workspace:
        """Return a private workspace of ``manifest``'s state (caller closes it).

        Args:
            store: where the parts are.
            manifest: the state, as just read from the store.
            generation: the manifest's generation.
            tmp_root: where the workspace directory is created.
            lean: leave ``lazy_prefixes`` in the index only (O(other files)); else a full
                checkout (O(all files)).

        Raises:
            PartMissing: a part is gone (re-read the manifest). CorruptBundle: a part is bad.
            StoreUnavailable: transient store failure. GitError: git failed.
        """
        with self._synced(store, manifest, generation) as entry:
            self._pin(entry)
            try:
                path = Path(tempfile.mkdtemp(prefix="memrepo-", dir=tmp_root))
                make_git_dir(path / ".git", branch_for(entry.user_id), entry.tip,
                             alternates=(entry.repo / "objects").resolve())
                if lean:
                    shutil.copyfile(entry.path / "writer.index", path / ".git" / "index")
                sessions = entry.sessions
            except BaseException:
                self._release(entry, None)
                raise
        ws = Workspace(path, entry.user_id, lazy_prefixes=self.lazy_prefixes if lean else (),
                       sessions=sessions, on_close=partial(self._release, entry, None))
        try:
            # no -u: the index is not rewritten here; `git add` hashes these few files once
            git(["checkout-index", "-a", "-f"] if lean else ["reset", "-q", "--hard"], path)
        except BaseException:
            self._discard(entry)  # whatever broke is not handed to the next request
            ws.close()
            raise
        return ws

    def readable(
        self, store: BundleStore, manifest: Manifest, generation: int, *, tmp_root: Path | None
    ) -> Workspace:
        """Return a read-only full checkout of ``manifest``'s state (caller closes it).

        The entry's shared view when it is at the tip or free to move there; otherwise a private
        checkout for this request.

        Raises:
            PartMissing, CorruptBundle, StoreUnavailable, GitError: as :meth:`writable`.
        """
        private_tip: str | None = None
        with self._synced(store, manifest, generation) as entry:
            self._pin(entry)
            try:
                view = self._view_at_tip(entry)
                if view is None:
                    private_tip = entry.tip
                sessions = entry.sessions
            except BaseException:
                self._release(entry, None)
                raise
        if view is not None:
            return Workspace(view.path, entry.user_id, owns_dir=False, read_only=True,
                             sessions=sessions, on_close=partial(self._release, entry, view))
        self.stats["private_views"] += 1
        path = Path(tempfile.mkdtemp(prefix="memrepo-view-", dir=tmp_root))
        ws = Workspace(path, entry.user_id, read_only=True,
                       on_close=partial(self._release, entry, None))
        try:
            make_git_dir(path / ".git", branch_for(entry.user_id), private_tip,
                         alternates=(entry.repo / "objects").resolve())
            git(["reset", "-q", "--hard"], path)
        except BaseException:
            ws.close()
            raise
        return ws

    def absorb(
        self, store: BundleStore, manifest: Manifest, generation: int,
        prefetched: Mapping[str, bytes], *, ws: Workspace | None = None,
        appended: Sequence[tuple[str, Mapping[str, str]]] | None = None, base: str | None = None,
    ) -> None:
        """Bring the user's entry to ``manifest``, which a writer just stored.

        Fast path, when the entry is still at ``base`` and ``ws`` is a lean workspace of this
        cache whose commits ``appended`` are exactly ``base..manifest.tip``: the workspace's new
        loose objects are linked into the entry, its index (skip-worktree bits added for the new
        lazy paths) becomes the entry's writer index, and the session map is extended from the
        commits' trailers — one git process, O(session). Otherwise the parts in ``prefetched``
        (the bytes just uploaded) are applied like any sync. A user the cache holds no entry
        for is left out (entries are made by checkouts; a new user's first write stays cheap).

        Raises:
            CorruptBundle, GitError, StoreUnavailable, OSError: the entry could not be updated
            (the caller may :meth:`forget` it; the stored state is unaffected).
        """
        with self._lock:
            if (store.url, manifest.user_id) not in self._entries:
                return
        if (ws is not None and appended and base is not None and self.lazy_prefixes
                and ws.lazy_prefixes == self.lazy_prefixes and manifest.tip == appended[-1][0]):
            with self._lock:
                entry = self._entries.get((store.url, manifest.user_id))
            if entry is not None:
                with entry.lock:
                    if not entry.evicted and entry.tip == base and self._absorb_workspace(
                            entry, ws, appended, manifest, generation):
                        return
        with self._synced(store, manifest, generation, prefetched=prefetched):
            pass

    def _absorb_workspace(
        self, entry: _Entry, ws: Workspace, appended: Sequence[tuple[str, Mapping[str, str]]],
        manifest: Manifest, generation: int,
    ) -> bool:
        """The fast path of :meth:`absorb` (entry lock held); ``False`` when it does not apply."""
        source = ws.path / ".git" / "objects"
        if any((source / "pack").glob("*.pack")):
            return False
        try:
            added = linked = 0
            for fan in source.iterdir():
                if len(fan.name) != 2 or not fan.is_dir():
                    continue
                target_dir = entry.repo / "objects" / fan.name
                target_dir.mkdir(exist_ok=True)
                for obj in fan.iterdir():
                    target = target_dir / obj.name
                    if target.exists():
                        continue
                    tmp = target_dir / f".tmp-{obj.name}"
                    try:
                        os.link(obj, tmp)
                    except OSError:
                        shutil.copyfile(obj, tmp)
                    os.replace(tmp, target)
                    added += obj.stat().st_size
                    linked += 1
            index = entry.path / "writer.index"
            shutil.copyfile(ws.path / ".git" / "index", entry.path / "writer.index.tmp")
            os.replace(entry.path / "writer.index.tmp", index)
            lazy = sorted(p for p in ws.written if p.startswith(self.lazy_prefixes))
            if lazy:
                git(["update-index", "-z", "--skip-worktree", "--stdin"], entry.repo,
                    env=entry.index_env(), input="".join(f"{p}\0" for p in lazy).encode())
            sessions = dict(entry.sessions)
            for commit, trailers in appended:
                if trailers.get("Session-Id"):
                    sessions[trailers["Session-Id"]] = CommittedSession(
                        commit, trailers.get("Session-Digest") or None)
            ref_file = entry.repo / entry.ref
            ref_file.parent.mkdir(parents=True, exist_ok=True)
            (entry.repo / "ref.tmp").write_text(f"{manifest.tip}\n")
            os.replace(entry.repo / "ref.tmp", ref_file)
        except BaseException:
            self._discard(entry)
            raise
        entry.sessions = sessions
        entry.known |= {p.tip for p in manifest.parts}
        entry.tip = manifest.tip
        entry.generation = generation
        entry.loose += linked
        entry.bytes += added
        self.stats["absorbed"] += 1
        return True

    def bundle(self, store: BundleStore, manifest: Manifest, generation: int) -> bytes:
        """Return one full bundle of ``manifest``'s state (``git clone`` can read it).

        Raises:
            PartMissing, CorruptBundle, StoreUnavailable, GitError: as :meth:`writable`.
        """
        from memrepo.chain import create_bundle

        with self._synced(store, manifest, generation) as entry:
            return create_bundle(entry.repo, entry.ref, scratch=entry.path)

    def forget(self, store_url: str, user_id: str) -> None:
        """Drop the user's entry (its directory goes when the last workspace using it closes)."""
        with self._lock:
            entry = self._entries.pop((store_url, user_id), None)
            if entry is None:
                return
            entry.evicted = True
            remove = entry.pins == 0 and entry.lock.acquire(blocking=False)
        if remove:
            try:
                shutil.rmtree(entry.path, ignore_errors=True)
            finally:
                entry.lock.release()

    def total_bytes(self) -> int:
        """Return the bytes the cache's entries hold (repositories, indexes and views)."""
        with self._lock:
            return sum(e.bytes + (e.view.bytes if e.view else 0) for e in self._entries.values())

    def close(self) -> None:
        """Remove this process's cache directory (workspaces still open become unusable)."""
        with self._lock:
            self._entries.clear()
        shutil.rmtree(self.root, ignore_errors=True)
        if self._alive is not None:
            self._alive.close()
            self._alive = None
            Path(f"{self.root}.alive").unlink(missing_ok=True)

    # -- syncing -------------------------------------------------------------------------------

    @contextmanager
    def _synced(
        self, store: BundleStore, manifest: Manifest, generation: int,
        prefetched: Mapping[str, bytes] | None = None,
    ) -> Iterator[_Entry]:
        key = (store.url, manifest.user_id)
        while True:
            with self._lock:
                entry = self._entries.get(key)
                if entry is None:
                    bucket = hashlib.sha256(store.url.encode()).hexdigest()[:12]
                    name = f"{manifest.user_id}.{next(self._serial)}"
                    entry = _Entry(key, self.root / bucket / name, manifest.user_id)
                    self._entries[key] = entry
                entry.last_used = time.monotonic()
            entry.lock.acquire()
            if not entry.evicted:
                break
            entry.lock.release()
        try:
            try:
                self._sync(entry, store, manifest, generation, prefetched)
            except BaseException as exc:
                from memrepo.chain import PartMissing

                if not isinstance(exc, PartMissing):
                    self._discard(entry)
                raise
            yield entry
        finally:
            drop = entry.evicted and entry.pins == 0
            entry.lock.release()
            if drop:
                shutil.rmtree(entry.path, ignore_errors=True)
        self._evict()

    def _sync(
        self, entry: _Entry, store: BundleStore, manifest: Manifest, generation: int,
        prefetched: Mapping[str, bytes] | None,
    ) -> None:
        if entry.tip == manifest.tip:
            entry.generation = generation
            self.stats["hits"] += 1
            return
        old = entry.tip
        if old is None:
            self.stats["cold"] += 1
            shutil.rmtree(entry.path, ignore_errors=True)
            entry.path.mkdir(parents=True)
            (entry.path / "empty").mkdir()
            make_git_dir(entry.repo, branch_for(entry.user_id), None, alternates=None, bare=True)
        else:
            self.stats["syncs"] += 1
        todo = self._missing(entry, manifest)
        self.stats["downloaded_bytes"] += fetch_parts(
            entry.repo, todo, store, entry.ref, prefetched=prefetched, scratch=entry.path
        )
        git(["update-ref", entry.ref, manifest.tip], entry.repo)
        forward = old is not None and (
            (bool(todo) and todo[0].prerequisites == (old,) and all(p.prerequisites for p in todo))
            or is_ancestor(entry.repo, old, manifest.tip)
        )
        self._update_sessions(entry, old if forward else None, manifest.tip)
        self._update_index(entry, old if forward else None, manifest.tip)
        entry.known = (entry.known if forward else set()) | {p.tip for p in manifest.parts}
        entry.tip = manifest.tip
        entry.generation = generation
        entry.bytes = _tree_bytes(entry.path, skip=entry.path / "view")
        log.debug("cache synced", extra={"user_id": entry.user_id, "parts": len(todo),
                                         "forward": forward, "cache_bytes": entry.bytes})

    def _missing(self, entry: _Entry, manifest: Manifest) -> list[Part]:
        """Return the parts to apply: those after the newest part whose tip the entry holds."""
        parts = manifest.parts
        if entry.tip is None:
            return list(parts)
        held = entry.known | {entry.tip}
        for i in range(len(parts) - 1, -1, -1):
            if parts[i].tip in held:
                return list(parts[i + 1:])
        query = "".join(f"{p.tip}^{{commit}}\n" for p in parts).encode()
        out = git(["cat-file", "--batch-check"], entry.repo, input=query).stdout.decode()
        present = [not line.endswith("missing") for line in out.splitlines()]
        for i in range(len(parts) - 1, -1, -1):
            if present[i]:
                return list(parts[i + 1:])
        return list(parts)

    def _update_sessions(self, entry: _Entry, old: str | None, tip: str) -> None:
        out = git_text(["log", f"--format={SESSION_LOG_FORMAT}", f"{old}..{tip}" if old else tip],
                       entry.repo)
        sessions = dict(entry.sessions) if old else {}
        for ids, found in reversed(parse_session_log(out)):  # oldest first: the newest wins
            for session_id in ids:
                sessions[session_id] = found
        entry.sessions = sessions

    def _update_index(self, entry: _Entry, old: str | None, tip: str) -> None:
        env = entry.index_env()
        lazy: list[str] = []
        if old is not None and (entry.path / "writer.index").exists():
            raw = git(["diff-tree", "-r", "-z", "--no-renames", old, tip], entry.repo).stdout
            fields = raw.split(b"\0")
            info: list[bytes] = []
            for meta, path in zip(fields[0::2], fields[1::2], strict=False):
                if not meta.startswith(b":"):
                    continue
                _, new_mode, _, new_sha, status = meta[1:].split(b" ")
                if status == b"D":
                    info.append(b"0 " + _ZERO.encode() + b"\t" + path + b"\0")
                else:
                    info.append(new_mode + b" " + new_sha + b"\t" + path + b"\0")
                    if path.decode().startswith(self.lazy_prefixes):
                        lazy.append(path.decode())
            if info:
                git(["update-index", "-z", "--index-info"], entry.repo, env=env,
                    input=b"".join(info))
            if lazy and self.lazy_prefixes:
                git(["update-index", "-z", "--skip-worktree", "--stdin"], entry.repo,
                    env=env, input="".join(f"{p}\0" for p in lazy).encode())
            return
        git(["read-tree", tip], entry.repo, env=env)
        # index format 4 prefix-compresses paths (git-update-index(1) --index-version): the
        # index of a long history of sessions/YYYY/MM/<id>.md shrinks by about half, and every
        # command reading, hashing or rewriting it in a workspace gets cheaper
        git(["update-index", "--index-version", "4"], entry.repo, env=env)
        if self.lazy_prefixes:
            out = git(["ls-files", "-z", "--", *self.lazy_prefixes], entry.repo, env=env).stdout
            lazy = [p for p in out.decode().split("\0") if p]
        if lazy:
            git(["update-index", "-z", "--skip-worktree", "--stdin"], entry.repo, env=env,
                input="".join(f"{p}\0" for p in lazy).encode())

    # -- views ---------------------------------------------------------------------------------

    def _view_at_tip(self, entry: _Entry) -> _View | None:
        """Return the entry's view at its tip with one more reader, or ``None`` if it is busy."""
        assert entry.tip is not None
        with self._lock:
            view = entry.view
            if view is not None and view.tip == entry.tip:
                view.readers += 1
                return view
            if view is not None and view.readers > 0:
                return None
        if view is None:
            path = entry.path / "view"
            shutil.rmtree(path, ignore_errors=True)
            make_git_dir(path / ".git", branch_for(entry.user_id), entry.tip,
                         alternates=(entry.repo / "objects").resolve())
            view = _View(path, entry.tip)
        git(["reset", "-q", "--hard", entry.tip], view.path)
        view.tip = entry.tip
        view.bytes = _tree_bytes(view.path)
        with self._lock:
            entry.view = view
            view.readers += 1
        return view

    # -- pins, eviction ------------------------------------------------------------------------

    def _pin(self, entry: _Entry) -> None:
        with self._lock:
            entry.pins += 1

    def _release(self, entry: _Entry, view: _View | None) -> None:
        with self._lock:
            entry.pins -= 1
            if view is not None:
                view.readers -= 1
            entry.last_used = time.monotonic()
            idle = entry.pins == 0
        if idle and entry.lock.acquire(blocking=False):
            try:
                if entry.evicted:
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    self._maybe_repack(entry)
            finally:
                entry.lock.release()
        self._evict()

    def _maybe_repack(self, entry: _Entry) -> None:
        packs = entry.repo / "objects" / "pack"
        many_packs = packs.is_dir() and len(list(packs.glob("*.pack"))) > self.repack_at_packs
        if not many_packs and entry.loose <= _REPACK_AT_LOOSE:
            return
        with self._lock:
            if entry.pins:
                return
        try:
            git(["repack", "-q", "-d", "--geometric=2"], entry.repo, timeout=300)
            entry.loose = 0
            entry.bytes = _tree_bytes(entry.path, skip=entry.path / "view")
        except GitError as exc:
            log.warning("cache repack failed", extra={"user_id": entry.user_id, "error": str(exc)})

    def _discard(self, entry: _Entry) -> None:
        """Forget an entry left inconsistent by a failed sync (removed once unpinned)."""
        with self._lock:
            if self._entries.get(entry.key) is entry:
                del self._entries[entry.key]
            entry.evicted = True

    def _evict(self) -> None:
        removals: list[Path] = []
        with self._lock:
            total = sum(e.bytes + (e.view.bytes if e.view else 0) for e in self._entries.values())
            if total <= self.max_bytes:
                return
            for entry in sorted(self._entries.values(), key=lambda e: e.last_used):
                if total <= self.max_bytes:
                    break
                if not entry.lock.acquire(blocking=False):
                    continue
                try:
                    if entry.pins == 0:
                        total -= entry.bytes + (entry.view.bytes if entry.view else 0)
                        del self._entries[entry.key]
                        entry.evicted = True
                        removals.append(entry.path)
                        self.stats["evictions"] += 1
                    elif entry.view is not None and entry.view.readers == 0:
                        total -= entry.view.bytes
                        removals.append(entry.view.path)
                        entry.view = None
                finally:
                    entry.lock.release()
        for path in removals:
            shutil.rmtree(path, ignore_errors=True)

    @staticmethod
    def _sweep(root: Path) -> None:
        """Remove the private directories of processes that no longer hold their lock."""
        for alive in root.glob("p*.alive"):
            try:
                handle = open(alive, "ab")  # noqa: SIM115
            except OSError:
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    continue  # its process is alive
                shutil.rmtree(str(alive)[: -len(".alive")], ignore_errors=True)
                alive.unlink(missing_ok=True)

    def describe(self) -> dict[str, Any]:
        """Return the cache's size and counters (for logs and benchmarks)."""
        with self._lock:
            entries = len(self._entries)
        return {"entries": entries, "bytes": self.total_bytes(), **self.stats}
