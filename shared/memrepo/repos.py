"""User repositories on a bundle store: a manifest, a base bundle and a chain of increments.

Layout and format: :mod:`memrepo.manifest`. The write protocol (:meth:`UserRepos.save`):

1. build the new part(s) in the workspace: usually one increment
   ``git bundle create inc.bundle <manifest tip>..refs/heads/user/<id>`` (O(session)); when the
   chain is due for compaction (:meth:`Manifest.needs_compaction`), a new base of the *previous*
   tip plus that one increment, so warm caches elsewhere keep everything they hold;
2. upload each part under a new unique name with ``if_generation_match=0``;
3. write the manifest with ``if_generation_match=<generation read at checkout>`` — the one
   conditional write; when it fails (:class:`PreconditionFailed`), another writer was first, the
   parts just uploaded are deleted and the caller re-applies the session;
4. only after the manifest landed, delete the parts it no longer references (compaction) and
   collect old garbage (:meth:`UserRepos.collect_garbage`).

A crash between any two steps leaves the previous manifest, which references only parts that
still exist: stray parts are unreferenced garbage, removed by the next compaction's collection
once older than ``gc_grace_s`` (a part younger than that may belong to a write in flight).
Readers read the manifest, then its immutable parts; a part deleted under them (a compaction
landed meanwhile) makes them read the manifest again, so they see the old or the new state, never
a mix. The token of :meth:`checkout`/:meth:`save` is the manifest's generation (0: no manifest).

Legacy layout: when a user has no manifest but a ``users/<id>/memory.bundle`` (the layout before
manifests), :meth:`checkout` hydrates it with token 0; the next :meth:`save` writes a base and a
manifest (``if_generation_match=0``) and then deletes the legacy object. Old and new writer
versions must not run at the same time: an old writer would keep writing ``memory.bundle``, which
the manifest layout ignores once the manifest exists.
"""

from __future__ import annotations

import logging
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memrepo.errors import CorruptBundle, GitError, PreconditionFailed, StoreUnavailable
from memrepo.ids import validate_user_id
from memrepo.manifest import (
    Manifest,
    Part,
    legacy_key,
    manifest_key,
    part_created_ms,
    part_key,
    user_prefix,
)

# git, bundles, workspaces and the cache are imported by the methods that use them: a reader of a
# user without memory only reads two keys of the store (see UserRepos.checkout_existing).
if TYPE_CHECKING:
    from memrepo.repocache import RepoCache
    from memrepo.store.base import BundleStore
    from memrepo.workspace import Workspace

log = logging.getLogger(__name__)

#: Manifest re-reads when a part vanished under a reader before giving up.
_MISSING_RETRIES = 4


@dataclass(frozen=True)
class _Origin:
    """What a workspace was checked out from: the manifest (``None``: none yet) and its token."""

    user_id: str
    manifest: Manifest | None
    generation: int
    legacy: bool = False


class UserRepos:
    """Check out and save user repositories on a :class:`BundleStore` (see the module docstring)."""

    def __init__(
        self,
        store: BundleStore,
        *,
        tmp_root: Path | None = None,
        cache: RepoCache | Callable[[], RepoCache] | None = None,
        max_increments: int = 64,
        gc_grace_s: float = 3600.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Args:
        store: where manifests and bundles live.
        tmp_root: where workspaces are created (default: the system temp dir).
        cache: a warm-instance cache, or a function that opens one when first needed: by the
            first checkout of stored memory (users without memory and a new user's first write
            never need it); ``None`` hydrates every checkout from the store.
        max_increments: chain length that triggers compaction on the next save.
        gc_grace_s: age in seconds under which an unreferenced part is never collected.
        clock: wall clock in Unix seconds (names parts; tests pass a fake).
        """
        self.store = store
        self.tmp_root = tmp_root
        self._cache: RepoCache | None = None
        self._open_cache: Callable[[], RepoCache] | None = None
        if callable(cache):
            self._open_cache = cache
        else:
            self._cache = cache
        self._cache_lock = threading.Lock()
        self.max_increments = max_increments
        self.gc_grace_s = gc_grace_s
        self._clock = clock

    @property
    def cache(self) -> RepoCache | None:
        """The warm-instance cache (opened on first use when given as a function), or ``None``."""
        if self._cache is None and self._open_cache is not None:
            with self._cache_lock:
                if self._cache is None:
                    self._cache = self._open_cache()
        return self._cache

    @staticmethod
    def key(user_id: str) -> str:
        """Return the key of the user's manifest, the object that exists iff the user has memory.

        (Users still on the legacy layout have ``users/<id>/memory.bundle`` instead.)
        """
        return manifest_key(user_id)

    def read_manifest(self, user_id: str) -> tuple[Manifest | None, int]:
        """Return the user's manifest and its generation, or ``(None, 0)``.

        Raises:
            InvalidEvent: invalid user id. CorruptManifest: the manifest is unreadable.
            StoreUnavailable: transient store failure.
        """
        stored = self.store.get(manifest_key(user_id))
        if stored is None:
            return None, 0
        return Manifest.from_bytes(stored.data, user_id), stored.generation

    # -- reading -------------------------------------------------------------------------------

    def checkout(
        self, user_id: str, *, read_only: bool = False, lean: bool = False
    ) -> tuple[Workspace, int]:
        """Return a workspace of the user's memory and the token (manifest generation) it is at.

        The token is 0 when the user has no manifest (the workspace is then empty, or the legacy
        bundle's state).

        Args:
            user_id: the user.
            read_only: the caller only reads (retrieval): with a cache, the workspace may be a
                checkout shared with concurrent readers, and refuses writes.
            lean: the caller goes through the :class:`Workspace` API (the session writer):
                with a cache, files under ``sessions/`` and ``timeline/`` stay in the index (read
                through :meth:`Workspace.read`, committed as usual when written), so the
                checkout costs O(entity files) instead of O(sessions).

        Raises:
            InvalidEvent: invalid user id. CorruptBundle: stored data is unusable.
            StoreUnavailable: the store failed transiently (or the manifest kept changing).
        """
        found = self._checkout(user_id, read_only=read_only, lean=lean, empty=True)
        assert found is not None  # empty=True: a user without memory gets an empty workspace
        return found

    def checkout_existing(
        self, user_id: str, *, read_only: bool = False, lean: bool = False
    ) -> tuple[Workspace, int] | None:
        """Like :meth:`checkout`, but ``None`` when the user has no memory (no manifest and no
        legacy bundle), with no empty workspace made (no ``git init``): what a reader needs.

        Raises:
            As :meth:`checkout`.
        """
        return self._checkout(user_id, read_only=read_only, lean=lean, empty=False)

    def _checkout(
        self, user_id: str, *, read_only: bool, lean: bool, empty: bool
    ) -> tuple[Workspace, int] | None:
        validate_user_id(user_id)
        missing: tuple[str, int] | None = None
        for _ in range(_MISSING_RETRIES):
            manifest, generation = self.read_manifest(user_id)
            legacy = False
            if manifest is None:
                found = self._checkout_legacy(user_id, empty)
                if found is None:
                    return None
                ws, legacy = found
            else:
                from memrepo.chain import PartMissing

                if missing is not None and missing[1] == generation:
                    raise CorruptBundle(f"{missing[0]} is referenced by the manifest but missing")
                try:
                    ws = self._checkout_manifest(manifest, generation, read_only, lean)
                except PartMissing as exc:
                    log.info("part vanished; reading the manifest again",
                             extra={"user_id": user_id, "key": exc.key})
                    missing = (exc.key, generation)
                    continue
            ws.read_only = ws.read_only or read_only
            ws.origin = _Origin(user_id, manifest, generation, legacy)
            return ws, generation
        raise StoreUnavailable(
            f"manifest of {user_id} kept changing during {_MISSING_RETRIES} reads"
        )

    def _checkout_legacy(self, user_id: str, empty: bool) -> tuple[Workspace, bool] | None:
        """Return the legacy bundle's workspace and whether there was one; without one, an empty
        workspace, or ``None`` when ``empty`` is false."""
        stored = self.store.get(legacy_key(user_id))
        if stored is None and not empty:
            return None
        from memrepo.workspace import Workspace

        ws = Workspace.hydrate(stored.data if stored else None, user_id, tmp_root=self.tmp_root)
        return ws, stored is not None

    def _checkout_manifest(
        self, manifest: Manifest, generation: int, read_only: bool, lean: bool
    ) -> Workspace:
        from memrepo.chain import fetch_parts
        from memrepo.gitcli import git
        from memrepo.workspace import Workspace

        if self.cache is not None:
            if read_only:
                return self.cache.readable(self.store, manifest, generation, tmp_root=self.tmp_root)
            return self.cache.writable(self.store, manifest, generation, tmp_root=self.tmp_root,
                                       lean=lean)
        ws = Workspace.create(manifest.user_id, tmp_root=self.tmp_root)
        try:
            fetch_parts(ws.path, manifest.parts, self.store, f"refs/heads/{ws.branch}",
                        scratch=ws.path / ".git")
            git(["update-ref", f"refs/heads/{ws.branch}", manifest.tip], ws.path)
            git(["checkout", "-q", "-f", ws.branch], ws.path)
        except BaseException:
            ws.close()
            raise
        return ws

    def export(self, user_id: str) -> bytes | None:
        """Return one full bundle of the user's branch (``git clone`` reads it), or ``None``.

        Built from the base and the increments (or the legacy bundle as stored).

        Raises:
            CorruptBundle, StoreUnavailable: as :meth:`checkout`.
        """
        from memrepo.chain import PartMissing

        validate_user_id(user_id)
        for _ in range(_MISSING_RETRIES):
            manifest, generation = self.read_manifest(user_id)
            if manifest is None:
                stored = self.store.get(legacy_key(user_id))
                return stored.data if stored else None
            try:
                if self.cache is not None:
                    return self.cache.bundle(self.store, manifest, generation)
                return self._export_uncached(manifest)
            except PartMissing:
                continue
        raise StoreUnavailable(
            f"manifest of {user_id} kept changing during {_MISSING_RETRIES} reads"
        )

    def _export_uncached(self, manifest: Manifest) -> bytes:
        from memrepo.chain import create_bundle, fetch_parts, make_git_dir
        from memrepo.gitcli import git

        with tempfile.TemporaryDirectory(prefix="memrepo-export-", dir=self.tmp_root) as tmp:
            repo = Path(tmp) / "repo.git"
            branch = f"user/{manifest.user_id}"
            make_git_dir(repo, branch, None, alternates=None, bare=True)
            fetch_parts(repo, manifest.parts, self.store, f"refs/heads/{branch}", scratch=Path(tmp))
            git(["update-ref", f"refs/heads/{branch}", manifest.tip], repo)
            return create_bundle(repo, f"refs/heads/{branch}", scratch=Path(tmp))

    # -- writing -------------------------------------------------------------------------------

    def save(self, ws: Workspace, generation: int) -> int:
        """Store the workspace's branch if the manifest is still at ``generation``.

        Args:
            ws: a workspace of the user (from :meth:`checkout`, or any repository of the branch).
            generation: the token :meth:`checkout` returned.

        Returns:
            The new token (the new manifest's generation).

        Raises:
            PreconditionFailed: another writer saved first (nothing of this save is referenced).
            StoreUnavailable: transient failure (the manifest may or may not have landed; a
                retry from :meth:`checkout` is safe). GitError: the branch has no commit.
        """
        from memrepo.chain import bundle_header, create_bundle, is_ancestor

        origin = ws.origin
        if not (isinstance(origin, _Origin) and origin.user_id == ws.user_id
                and origin.generation == generation):
            manifest, live = self.read_manifest(ws.user_id)
            if live != generation:
                raise PreconditionFailed(
                    f"{manifest_key(ws.user_id)}: live generation is {live}, "
                    f"save expected {generation}"
                )
            origin = _Origin(ws.user_id, manifest, live, legacy=manifest is None)
        tip = ws.head()
        if tip is None:
            raise GitError(f"cannot save {ws.branch}: it has no commit")
        old = origin.manifest
        ref = f"refs/heads/{ws.branch}"
        scratch = ws.path / ".git"
        now_ms = int(self._clock() * 1000)
        uploads: list[tuple[Part, bytes]] = []
        kind = "increment"
        appended = ws.appended_commits(old.tip) if old is not None else None
        if old is not None and tip == old.tip:
            new, kind = old, "unchanged"
        elif old is None or (appended is None and not is_ancestor(ws.path, old.tip, tip)):
            data = create_bundle(ws.path, ref, scratch=scratch)
            base = Part.of(part_key(ws.user_id, "base", data, now_ms), tip, data)
            uploads.append((base, data))
            new, kind = Manifest(ws.user_id, base), "base"
        else:
            data = create_bundle(ws.path, ref, since=old.tip, scratch=scratch, verify=False)
            if bundle_header(data) != ({ref: tip}, (old.tip,)):
                raise CorruptBundle(f"increment {old.tip[:12]}..{tip[:12]}: unexpected header")
            inc = Part.of(part_key(ws.user_id, "inc", data, now_ms), tip, data, (old.tip,))
            if old.needs_compaction(self.max_increments):
                base_data = self._bundle_at(ws, old.tip)
                base = Part.of(part_key(ws.user_id, "base", base_data, now_ms), old.tip, base_data)
                uploads.append((base, base_data))
                new, kind = Manifest(ws.user_id, base, (inc,)), "compaction"
            else:
                new = old.with_increment(inc)
            uploads.append((inc, data))
        for part, data in uploads:
            self._put_part(part.key, data)
        new_generation = self._put_manifest(new, generation, [p.key for p, _ in uploads])
        # The manifest landed: the state is stored (invariant 1). The rest is best effort.
        log.info("manifest saved", extra={
            "user_id": ws.user_id, "generation": new_generation, "kind": kind,
            "increments": len(new.increments), "uploaded_bytes": sum(len(d) for _, d in uploads)})
        cache = self._cache  # a cache not opened yet holds no entry to bring up to date
        if cache is not None:
            try:
                cache.absorb(self.store, new, new_generation, {p.key: d for p, d in uploads},
                             ws=ws, appended=appended, base=old.tip if old else None)
            except Exception as exc:  # noqa: BLE001 - the cache is an optimisation; drop it
                log.warning("cache not updated after save; entry dropped",
                            extra={"user_id": ws.user_id, "error": f"{type(exc).__name__}: {exc}"})
                cache.forget(self.store.url, ws.user_id)
        superseded = (old.keys() - new.keys()) if old is not None else set()
        if origin.legacy:
            superseded.add(legacy_key(ws.user_id))
        self._delete_quietly(sorted(superseded))
        if kind == "compaction" or (kind == "base" and (old is not None or origin.legacy)):
            try:
                self.collect_garbage(ws.user_id)
            except Exception as exc:  # noqa: BLE001 - garbage waits for the next collection
                log.warning("garbage collection failed", extra={"user_id": ws.user_id,
                                                                 "error": str(exc)})
        return new_generation

    def _put_manifest(self, new: Manifest, generation: int, uploaded: list[str]) -> int:
        """Write the manifest if the live generation is ``generation``; return the new one.

        A 412 may answer a retried request whose first attempt landed (the client library
        retries conditional uploads on timeouts and 5xx). So on :class:`PreconditionFailed` the
        live manifest is read: if it is ours, the write succeeded; otherwise the parts just
        uploaded that it does not reference are deleted (their names are unique to this write,
        so no other manifest can ever reference them) and the failure is raised.
        """
        data = new.to_bytes()
        key = manifest_key(new.user_id)
        try:
            return self.store.put(key, data, if_generation_match=generation)
        except PreconditionFailed:
            live = self.store.get(key)
            if live is not None and live.data == data:
                log.info("manifest write had landed before its retry", extra={"key": key})
                return live.generation
            referenced: set[str] = set()
            if live is not None:
                try:
                    referenced = Manifest.from_bytes(live.data, new.user_id).keys()
                except CorruptBundle:
                    referenced = set(uploaded)  # unreadable: keep everything for the collector
            self._delete_quietly([k for k in uploaded if k not in referenced])
            raise

    def _bundle_at(self, ws: Workspace, commit: str) -> bytes:
        """Return a full bundle of ``refs/heads/<branch>`` at ``commit`` (an ancestor of HEAD).

        Built in a throwaway repository that borrows the workspace's objects, so the workspace's
        own ref never moves.
        """
        from memrepo.chain import create_bundle, make_git_dir

        with tempfile.TemporaryDirectory(prefix="memrepo-base-", dir=ws.path / ".git") as tmp:
            repo = Path(tmp) / "repo.git"
            make_git_dir(repo, ws.branch, commit,
                         alternates=(ws.path / ".git" / "objects").resolve(), bare=True)
            return create_bundle(repo, f"refs/heads/{ws.branch}", scratch=Path(tmp))

    def _put_part(self, key: str, data: bytes) -> None:
        """Create a part object; an identical object already there (a retried upload) is fine."""
        try:
            self.store.put(key, data, if_generation_match=0)
        except PreconditionFailed:
            existing = self.store.get(key)
            if existing is None or existing.data != data:
                raise
            log.info("part already stored by an earlier attempt", extra={"key": key})

    def _delete_quietly(self, keys: list[str]) -> None:
        for key in keys:
            try:
                self.store.delete(key, all_versions=True)
            except Exception as exc:  # noqa: BLE001 - left for garbage collection
                log.warning("could not delete part; garbage collection will retry",
                            extra={"key": key, "error": f"{type(exc).__name__}: {exc}"})

    # -- maintenance ---------------------------------------------------------------------------

    def collect_garbage(self, user_id: str, *, grace_s: float | None = None) -> list[str]:
        """Delete the user's objects the manifest does not reference; return their keys.

        A part younger than ``grace_s`` (by the time in its name) is kept: it may belong to a
        write whose manifest has not landed yet. The legacy ``memory.bundle`` is deleted once a
        manifest exists. Objects whose names memrepo did not make are left alone.

        Args:
            user_id: the user.
            grace_s: minimum age in seconds (default: ``gc_grace_s`` of the constructor).

        Raises:
            CorruptManifest: the manifest is unreadable (nothing is deleted).
            StoreUnavailable: transient store failure.
        """
        grace_ms = int(1000 * (self.gc_grace_s if grace_s is None else grace_s))
        manifest, _ = self.read_manifest(user_id)
        referenced = {manifest_key(user_id)}
        if manifest is None:
            referenced.add(legacy_key(user_id))
        else:
            referenced |= manifest.keys()
        now_ms = int(self._clock() * 1000)
        doomed = []
        for key in self.store.list(user_prefix(user_id)):
            if key in referenced:
                continue
            created = part_created_ms(key)
            if key == legacy_key(user_id) or (created is not None and now_ms - created >= grace_ms):
                doomed.append(key)
        for key in doomed:
            self.store.delete(key, all_versions=True)
        if doomed:
            log.info("garbage collected", extra={"user_id": user_id, "objects": len(doomed)})
        return doomed

    def delete(self, user_id: str) -> int:
        """Delete every object of the user (noncurrent versions included); return the count.

        The manifest goes first, so a concurrent reader sees "no memory", never a broken chain.
        """
        prefix = user_prefix(user_id)
        keys = self.store.list(prefix)
        first = [k for k in keys if k == manifest_key(user_id)]
        count = sum(self.store.delete(k, all_versions=True) for k in first)
        count += self.store.purge(prefix)  # noncurrent versions of deleted parts too
        if self._cache is not None:  # a cache never opened holds nothing
            self._cache.forget(self.store.url, user_id)
        return count
