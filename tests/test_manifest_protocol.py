"""The manifest protocol (base + increments + one conditional manifest write) and the warm cache.

Every test takes ``new_store`` (a factory of empty stores) and runs against the in-memory fake and
the filesystem store here, and against Cloud Storage on fake-gcs-server in
``test_stack_manifest.py``. Crashes are simulated by :class:`fakes.CrashingStore` (a
``BaseException`` raised before the chosen store call, so nothing in the code under test can
swallow it); ``test_killed_process_mid_compaction`` kills a real process with SIGKILL.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fakes import CrashingStore, InMemoryStore, SimulatedCrash
from helpers import event
from memrepo.errors import CorruptBundle, PreconditionFailed
from memrepo.events import parse_session_ended
from memrepo.gitcli import git_text
from memrepo.manifest import CorruptManifest, Manifest, Part, manifest_key
from memrepo.repocache import RepoCache
from memrepo.repos import UserRepos
from memrepo.store import BundleStore, FilesystemStore, StoredObject
from memrepo.workspace import ReadOnlyWorkspace, Workspace
from memrepo.writer import DeterministicWriter, SessionWriter

ROOT = Path(__file__).resolve().parents[1]
StoreFactory = Callable[[], BundleStore]


@pytest.fixture(params=["memory", "filesystem"])
def new_store(request, tmp_path) -> StoreFactory:
    counter = itertools.count()
    if request.param == "memory":
        return InMemoryStore
    return lambda: FilesystemStore(tmp_path / f"store{next(counter)}")


@pytest.fixture
def caches(tmp_path):
    made: list[RepoCache] = []

    def make(max_bytes: int = 1 << 30) -> RepoCache:
        cache = RepoCache(tmp_path / "caches", max_bytes)
        made.append(cache)
        return cache

    yield make
    for cache in made:
        cache.close()


def repos_on(store: BundleStore, cache: RepoCache | None = None, **kw) -> UserRepos:
    return UserRepos(store, cache=cache, max_increments=kw.pop("max_increments", 2), **kw)


def write(repos: UserRepos, session_id: str, user: str = "ana", **kw):
    sleep = kw.pop("sleep", lambda s: None)
    writer = SessionWriter(repos, DeterministicWriter(), sleep=sleep, **kw)
    day = int("".join(c for c in session_id if c.isdigit()) or 0) % 28 + 1
    return writer.write(parse_session_ended(event(
        user_id=user, session_id=session_id, occurred_at=f"2024-05-{day:02d}T09:00:00+00:00")))


def history(repos: UserRepos, user: str = "ana") -> list[str]:
    """Session ids of the user's branch, newest first, through a read-only checkout."""
    ws, _ = repos.checkout(user, read_only=True)
    with ws:
        if ws.head() is None:
            return []
        out = git_text(["log", "--format=%(trailers:key=Session-Id,valueonly)%x1e", ws.branch],
                       ws.path)
    return [r.strip() for r in out.split("\x1e") if r.strip()]


def assert_clean(store: BundleStore, user: str = "ana") -> Manifest:
    """After garbage collection with no grace, exactly the referenced objects remain."""
    repos = repos_on(store)
    repos.collect_garbage(user, grace_s=0)
    manifest, _ = repos.read_manifest(user)
    assert manifest is not None
    assert set(store.list(f"users/{user}/")) == manifest.keys() | {manifest_key(user)}
    return manifest


# -- the manifest itself -----------------------------------------------------------------------


def test_manifest_round_trip_and_validation():
    base = Part.of("users/ana/bundles/0000000000001-base-" + "a" * 32 + ".bundle", "1" * 40, b"x")
    inc = Part.of("users/ana/bundles/0000000000002-inc-" + "b" * 32 + ".bundle", "2" * 40, b"yy",
                  ("1" * 40,))
    manifest = Manifest("ana", base, (inc,))
    assert Manifest.from_bytes(manifest.to_bytes(), "ana") == manifest
    assert manifest.tip == "2" * 40 and manifest.increment_bytes == 2
    assert manifest.needs_compaction(max_increments=1) and manifest.needs_compaction(64)  # 2 > 1
    for bad in (b"not json", b"[]", manifest.to_bytes().replace(b'"format":1', b'"format":9')):
        with pytest.raises(CorruptManifest):
            Manifest.from_bytes(bad, "ana")
    with pytest.raises(CorruptManifest, match="names user"):
        Manifest.from_bytes(manifest.to_bytes(), "bob")
    foreign = Manifest("ana", Part("users/bob/x.bundle", "1" * 40, 1, "c" * 64))
    with pytest.raises(CorruptManifest, match="outside"):
        Manifest.from_bytes(foreign.to_bytes(), "ana")
    assert issubclass(CorruptManifest, CorruptBundle)  # permanent: acknowledged, not retried


# -- the write path ----------------------------------------------------------------------------


def test_writes_grow_a_chain_then_compact_into_a_base(new_store, caches):
    store = new_store()
    repos = repos_on(store, caches(), max_increments=2)
    write(repos, "s1")
    one, _ = repos.read_manifest("ana")
    assert one is not None and one.increments == ()
    write(repos, "s2")
    write(repos, "s3")
    three, _ = repos.read_manifest("ana")
    assert three is not None and three.base == one.base and len(three.increments) == 2
    assert three.increments[1].prerequisites == (three.increments[0].tip,)
    write(repos, "s4")  # the chain is full: a new base at s3's tip plus one increment for s4
    four, _ = repos.read_manifest("ana")
    assert four is not None and four.base.tip == three.tip and len(four.increments) == 1
    assert set(store.list("users/ana/")) == four.keys() | {manifest_key("ana")}  # old parts gone
    assert history(repos) == history(repos_on(store)) == ["s4", "s3", "s2", "s1"]
    ws, _ = repos_on(store).checkout("ana")
    with ws:  # every lean write updated the month's timeline (a skip-worktree file) for real
        timeline = ws.read("timeline/2024-05.md") or ""
    assert all(f" · s{n}\n" in timeline for n in (1, 2, 3, 4))


def test_export_is_one_bundle_git_can_clone(new_store, caches, tmp_path):
    store = new_store()
    for cache in (None, caches()):
        repos = repos_on(store, cache)
        for n in range(1, 5):
            write(repos, f"s{n}")
        bundle = tmp_path / f"export-{cache is None}.bundle"
        bundle.write_bytes(repos.export("ana") or b"")
        clone = tmp_path / f"clone-{cache is None}"
        subprocess.run(["git", "clone", "-q", "-b", "user/ana", str(bundle), str(clone)],
                       check=True)
        assert (clone / "sessions" / "2024" / "05" / "s4.md").exists()
        assert repos.export("nobody") is None


def test_compaction_when_increments_outweigh_the_base(new_store):
    store = new_store()
    repos = repos_on(store, max_increments=64)
    bases = []
    for n in range(1, 8):
        write(repos, f"s{n}")
        manifest, _ = repos.read_manifest("ana")
        assert manifest is not None and len(manifest.increments) < 7
        bases.append(manifest.base.key)
        assert manifest.increment_bytes <= 2 * manifest.base.size + 10_000
    assert len(set(bases)) > 1  # compacted at least once although far below 64 increments
    assert history(repos)[0] == "s7" and len(history(repos)) == 7


def test_legacy_bundle_is_read_then_migrated(new_store, caches):
    store = new_store()
    with Workspace.create("ana") as ws:
        ws.write("profile.md", "---\nname: \"Ana\"\n---\n# Ana\n")
        ws.commit("Old layout", {"Session-Id": "old", "Writer": "deterministic"})
        store.put("users/ana/memory.bundle", ws.bundle(), if_generation_match=0)
    repos = repos_on(store, caches())
    assert history(repos) == ["old"]
    ws, token = repos.checkout("ana")
    with ws:
        assert token == 0 and ws.read("profile.md") is not None
    found = repos.checkout_existing("ana", read_only=True)  # a reader sees the legacy memory too
    assert found is not None
    with found[0] as ws:
        assert found[1] == 0 and ws.read("profile.md") is not None
    write(repos, "s1")
    assert "users/ana/memory.bundle" not in store.list("users/ana/")
    assert history(repos_on(store)) == ["s1", "old"]
    assert_clean(store)


def test_tampered_part_is_refused(new_store):
    store = new_store()
    repos = repos_on(store)
    write(repos, "s1")
    manifest, _ = repos.read_manifest("ana")
    assert manifest is not None
    data = store.get(manifest.base.key).data  # type: ignore[union-attr]
    store.delete(manifest.base.key, all_versions=True)
    store.put(manifest.base.key, data[:-1] + bytes([data[-1] ^ 1]), if_generation_match=0)
    with pytest.raises(CorruptBundle, match="do not match"):
        repos.checkout("ana")


# -- crashes and races -------------------------------------------------------------------------


def _mutations(steps: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(op, key) for op, key in steps if op in ("put", "delete")]


@pytest.mark.parametrize("seeded", [1, 3], ids=["increment", "compaction"])
def test_crash_at_each_step_keeps_every_session(new_store, caches, seeded):
    """Crash before each store write of the next session's save, then restart and redeliver."""
    earlier = [f"s{n}" for n in range(seeded, 0, -1)]
    new = f"s{seeded + 1}"

    template = new_store()
    for session in reversed(earlier):
        write(repos_on(template), session)

    def seed() -> BundleStore:  # a copy of the seeded objects (generations are the new store's)
        store = new_store()
        for key in template.list(""):
            store.put(key, template.get(key).data, if_generation_match=0)  # type: ignore[union-attr]
        return store

    probe = CrashingStore(seed())
    write(repos_on(probe, caches()), new)
    steps = _mutations(probe.steps)
    manifest_step = steps.index(("put", manifest_key("ana")))
    if seeded == 3:  # compaction: base, increment, manifest, then three superseded parts
        assert [op for op, _ in steps] == ["put", "put", "put", "delete", "delete", "delete"]
    for crash_at in range(len(steps) + 1):
        store = seed()
        observer = repos_on(store, caches())  # another warm instance
        assert history(observer) == earlier
        crashing = CrashingStore(store, crash_at=crash_at)
        if crash_at < len(steps):
            with pytest.raises(SimulatedCrash):
                write(repos_on(crashing, caches()), new)
        else:
            write(repos_on(crashing, caches()), new)
        landed = crash_at > manifest_step
        after = [new, *earlier] if landed else earlier
        assert history(repos_on(store)) == after, f"crash before step {crash_at}"
        assert history(observer) == after
        redelivered = write(repos_on(store, caches()), new)
        assert redelivered.status == ("duplicate" if landed else "committed")
        assert history(repos_on(store)) == history(observer) == [new, *earlier]
        assert_clean(store)
        assert history(repos_on(store)) == [new, *earlier]


def test_concurrent_writers_lose_nothing(new_store, caches):
    store = new_store()
    instances = [caches(), caches(), None]  # two warm instances (shared by two threads each) and
    threads_per_instance = {0: 2, 1: 2, 2: 1}  # one without a cache
    plan = []
    for instance, count in threads_per_instance.items():
        for t in range(count):
            plan.append((instance, [f"i{instance}t{t}n{n}" for n in range(4)]))
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(plan))

    def run(instance: int, sessions: list[str]) -> None:
        repos = repos_on(store, instances[instance], max_increments=3)
        barrier.wait()
        try:
            for session in sessions:
                write(repos, session, max_attempts=200, sleep=lambda s: time.sleep(s / 10))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=item) for item in plan]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    wanted = sorted(s for _, sessions in plan for s in sessions)
    for cache in instances:
        found = history(repos_on(store, cache))
        assert sorted(found) == wanted and len(found) == len(set(found))
    assert_clean(store)
    assert sorted(history(repos_on(store))) == wanted


class _LostReply(CrashingStore):
    """The first manifest write lands, but its caller sees a 412: what a client library's retry
    of a request whose reply was lost looks like."""

    lost = False

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        generation = super()._put(key, data, if_generation_match)
        if key.endswith("manifest.json") and not self.lost:
            self.lost = True
            raise PreconditionFailed(f"{key}: precondition failed (the retry of a landed write)")
        return generation


def test_a_manifest_write_that_landed_before_its_retry_counts(new_store):
    store = new_store()
    write(repos_on(store), "s1")
    result = write(repos_on(_LostReply(store)), "s2")
    assert result.status == "committed" and result.attempts == 1
    assert history(repos_on(store)) == ["s2", "s1"]
    assert_clean(store)


def test_the_same_session_delivered_twice_at_once(new_store, caches):
    """Two deliveries make byte-identical commits; one lands, the other finds it: no part of the
    winner is deleted by the loser."""
    store = new_store()
    write(repos_on(store), "s1")
    twin: list = []

    class TwinLandsFirst(CrashingStore):
        def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
            if key.endswith("manifest.json") and not twin:
                twin.append(write(repos_on(store, caches(), clock=lambda: 1.7e9), "s2"))
            return super()._put(key, data, if_generation_match)

    # one clock for both: identical commits (same second) would give identical part bytes and
    # times; only the nonce in the part names keeps the loser from deleting the winner's part
    result = write(repos_on(TwinLandsFirst(store), caches(), clock=lambda: 1.7e9), "s2")
    assert twin[0].status == "committed"
    assert result.status == "duplicate" and result.attempts == 2
    assert history(repos_on(store)) == ["s2", "s1"]
    assert_clean(store)
    errors: list[BaseException] = []

    def deliver() -> None:
        try:
            write(repos_on(store, caches()), "s3", max_attempts=50)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert history(repos_on(store)) == ["s3", "s2", "s1"]
    assert_clean(store)


class _Interleave(BundleStore):
    """Runs ``action`` once, just before the first ``get`` of a key matching ``when``."""

    def __init__(self, inner: BundleStore, when: Callable[[str], bool], action: Callable[[], None]):
        self.inner, self.url, self.when, self.action = inner, inner.url, when, action
        self.fired = False

    def _get(self, key: str) -> StoredObject | None:
        if not self.fired and self.when(key):
            self.fired = True
            self.action()
        return self.inner.get(key)

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        return self.inner.put(key, data, if_generation_match=if_generation_match)

    def _delete(self, key: str, all_versions: bool) -> int:
        return self.inner.delete(key, all_versions=all_versions)

    def _list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)


@pytest.mark.parametrize("nth_part", [0, 2])
@pytest.mark.parametrize("cached", [False, True])
def test_reader_sees_the_old_or_the_new_state_never_a_mix(new_store, caches, nth_part, cached):
    """A compaction lands (and deletes the old parts) while a reader is downloading them."""
    store = new_store()
    writer = repos_on(store)
    for n in (1, 2, 3):
        write(writer, f"s{n}")
    manifest, _ = writer.read_manifest("ana")
    assert manifest is not None and len(manifest.parts) == 3
    target = manifest.parts[nth_part].key
    reader_store = _Interleave(store, lambda key: key == target, lambda: write(writer, "s4"))
    seen = history(repos_on(reader_store, caches() if cached else None))
    assert reader_store.fired and target not in store.list("users/ana/")
    assert seen == ["s4", "s3", "s2", "s1"]  # the manifest read again: the new state, whole


def test_gc_spares_the_parts_of_a_write_in_flight(new_store):
    store = new_store()
    repos = repos_on(store)
    write(repos, "s1")
    collector = repos_on(store)
    collected: list[list[str]] = []

    class GcBeforeManifest(CrashingStore):
        def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
            if key == manifest_key("ana"):
                collected.append(collector.collect_garbage("ana"))  # default grace: one hour
            return super()._put(key, data, if_generation_match)

    write(repos_on(GcBeforeManifest(store)), "s2")
    assert collected == [[]]
    assert history(repos_on(store)) == ["s2", "s1"]
    assert_clean(store)


@pytest.mark.parametrize("kill_before", ["manifest", "first delete"])
def test_killed_process_mid_compaction(tmp_path, kill_before):
    """A real writer process dies by SIGKILL at a step of compaction; a new one redelivers."""
    store_dir = tmp_path / "store"
    repos = repos_on(FilesystemStore(store_dir))
    for n in (1, 2, 3):
        write(repos, f"s{n}")
    script = f"""
import os, signal, sys
sys.path[:0] = [{str(ROOT / "tests")!r}, {str(ROOT / "shared")!r}]
from fakes import CrashingStore
from test_manifest_protocol import repos_on, write
from memrepo.store import FilesystemStore

class Killing(CrashingStore):
    def _step(self, op, key):
        if ({kill_before!r} == "manifest" and op == "put" and key.endswith("manifest.json")) or (
                {kill_before!r} == "first delete" and op == "delete"):
            os.kill(os.getpid(), signal.SIGKILL)
        super()._step(op, key)

write(repos_on(Killing(FilesystemStore({str(store_dir)!r}))), "s4")
"""
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                          timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-2000:]
    landed = kill_before == "first delete"
    store = FilesystemStore(store_dir)
    assert history(repos_on(store)) == (["s4", "s3", "s2", "s1"] if landed else ["s3", "s2", "s1"])
    assert write(repos_on(store), "s4").status == ("duplicate" if landed else "committed")
    assert history(repos_on(store)) == ["s4", "s3", "s2", "s1"]
    assert_clean(store)


# -- the warm cache ----------------------------------------------------------------------------


def test_cache_is_never_stale_after_another_instance_wrote(new_store, caches):
    store = new_store()
    a = repos_on(store, caches(), max_increments=2)
    b = repos_on(store, caches(), max_increments=2)
    write(a, "s1")
    write(a, "s2")
    assert history(a) == ["s2", "s1"]
    write(b, "s3")  # an increment a's cache does not hold
    before = dict(a.cache.stats)  # type: ignore[union-attr]
    assert history(a) == ["s3", "s2", "s1"]
    manifest, _ = a.read_manifest("ana")
    assert manifest is not None
    downloaded = a.cache.stats["downloaded_bytes"] - before["downloaded_bytes"]  # type: ignore[union-attr]
    assert downloaded == manifest.increments[-1].size  # only the new increment
    write(b, "s4")
    write(b, "s5")  # b compacts: a new base at s4's tip, the old parts deleted
    before = dict(a.cache.stats)  # type: ignore[union-attr]
    assert history(a) == ["s5", "s4", "s3", "s2", "s1"]
    manifest, _ = a.read_manifest("ana")
    downloaded = a.cache.stats["downloaded_bytes"] - before["downloaded_bytes"]  # type: ignore[union-attr]
    assert manifest is not None and downloaded < manifest.base.size + manifest.increment_bytes
    write(a, "s6")  # a writer on a's warm cache builds on b's state
    assert history(b) == ["s6", "s5", "s4", "s3", "s2", "s1"]
    assert b.delete("ana") >= 2
    assert history(a) == []
    write(b, "n1")  # the user starts again: a must not resurrect its cached history
    assert history(a) == ["n1"]
    write(a, "n2")
    assert history(b) == ["n2", "n1"]


def test_lean_writer_workspace_keeps_transcripts_in_the_index(new_store, caches):
    store = new_store()
    repos = repos_on(store, caches(), max_increments=64)
    for n in (1, 2, 3):
        write(repos, f"s{n}")
    ws, token = repos.checkout("ana", lean=True)
    with ws:
        assert not (ws.path / "sessions").exists() and (ws.path / "profile.md").exists()
        assert ws.files("sessions/") == [f"sessions/2024/05/s{n}.md" for n in (1, 2, 3)]
        assert "Session s2" in (ws.read("sessions/2024/05/s2.md") or "")
        assert ws.find_session("s2") is not None and ws.find_session("zz") is None
        assert not (ws.path / "timeline").exists()
        month = ws.read("timeline/2024-05.md") or ""
        assert "s3" in month  # read from the index
        ws.write("sessions/2024/05/s9.md", "new\n")
        ws.write("timeline/2024-05.md", month + "## 2024-05-30 10:00 · s9\n")  # an existing one
        ws.commit("extra", {"Session-Id": "s9"})
        committed = git_text(["show", "HEAD:timeline/2024-05.md"], ws.path)
        assert committed.endswith("· s9\n")  # the skip-worktree file was staged
        assert git_text(["status", "--porcelain"], ws.path) == ""
        tree = git_text(["ls-tree", "-r", "--name-only", "HEAD", "sessions/"], ws.path)
        assert tree.count("\n") == 4
        assert ws.find_session("s9") is not None  # after a commit: from git log, not the map
        repos.save(ws, token)
    full, _ = repos.checkout("ana")
    with full:
        assert (full.path / "sessions" / "2024" / "05" / "s9.md").read_text() == "new\n"
        assert (full.path / "timeline" / "2024-05.md").read_text().endswith("· s9\n")
        assert git_text(["status", "--porcelain"], full.path) == ""


def test_readers_share_a_view_and_writers_get_private_copies(caches):
    store = InMemoryStore()
    cache = caches()
    repos = repos_on(store, cache)
    write(repos, "s1")
    r1, _ = repos.checkout("ana", read_only=True)
    r2, _ = repos.checkout("ana", read_only=True)
    w1, _ = repos.checkout("ana")
    w2, _ = repos.checkout("ana", lean=True)
    paths = {r1.path, w1.path, w2.path}
    assert r1.path == r2.path and len(paths) == 3
    with pytest.raises(ReadOnlyWorkspace):
        r1.write("x.md", "x")
    write(repos_on(store, cache), "s2")  # the view is in use at s1: the next reader gets its own
    r3, _ = repos.checkout("ana", read_only=True)
    assert r3.path not in paths and r3.read("sessions/2024/05/s2.md") is not None
    assert r1.read("sessions/2024/05/s2.md") is None  # r1 still sees its state, untouched
    for ws in (r1, r2, r3, w1, w2):
        ws.close()
    r4, _ = repos.checkout("ana", read_only=True)  # free again: moved to s2 in place
    with r4:
        assert r4.path == r1.path and r4.read("sessions/2024/05/s2.md") is not None
    assert cache.stats["private_views"] == 1


def test_cache_is_bounded_lru_and_spares_what_is_in_use(caches):
    store = InMemoryStore()
    cache = caches()
    repos = repos_on(store, cache)
    write(repos, "s1", user="u1")
    write(repos, "s1", user="u2")
    assert cache.describe()["entries"] == 0  # a new user's first write leaves the cache alone
    history(repos, "u1")  # checkouts fill it
    one = cache.total_bytes()
    assert one > 0
    cache.max_bytes = int(one * 1.5)
    history(repos, "u2")  # u1 is least recently used: evicted
    assert cache.describe()["entries"] == 1 and cache.stats["evictions"] == 1
    cold = cache.stats["cold"]
    history(repos, "u2")
    assert cache.stats["cold"] == cold  # u2 still warm
    held, _ = repos.checkout("u1")  # u1 comes back cold, and is pinned while held
    assert cache.stats["cold"] == cold + 1
    history(repos, "u2")  # evicting now could only take u2
    assert held.read("profile.md") is not None and (held.path / ".git").exists()
    held.close()
    cache.max_bytes = 0
    history(repos, "u1")
    assert cache.total_bytes() == 0 and cache.describe()["entries"] == 0
    assert not any(p.is_dir() for p in cache.root.rglob("*.*"))  # entry directories removed


def test_revert_and_rebuild_work_on_cached_workspaces(caches):
    from memrepo.operations.apply import RepoChanger
    from memrepo.operations.rebuild import Rebuilder
    from memrepo.operations.revert import revert

    store = InMemoryStore()
    repos = repos_on(store, caches(), max_increments=3)
    for n in (1, 2, 3, 4):
        write(repos, f"s{n}")
    changer = RepoChanger(repos, sleep=lambda s: None)
    assert revert(changer, "ana", "s2").status == "reverted"
    result = Rebuilder(changer, DeterministicWriter(), store).rebuild("ana")
    assert result.sessions == 3
    write(repos, "s5")
    fresh = repos_on(store)
    ws, _ = fresh.checkout("ana")
    with ws:
        assert ws.read("sessions/2024/05/s2.md") is None
        assert ws.read("sessions/2024/05/s5.md") is not None
    assert history(repos) == history(fresh)
    assert_clean(store)


def test_a_cache_given_as_a_function_is_opened_when_first_needed(tmp_path):
    opened: list[RepoCache] = []

    def open_cache() -> RepoCache:
        opened.append(RepoCache(tmp_path / "caches", 1 << 30))
        return opened[-1]

    repos = UserRepos(InMemoryStore(), cache=open_cache)
    try:
        assert repos.checkout_existing("ana", read_only=True) is None  # no memory: no cache
        assert repos.delete("ana") == 0
        assert opened == [] and not (tmp_path / "caches").exists()
        write(repos, "s1")  # a new user's first write: nothing in a cache to update either
        assert opened == []
        assert history(repos) == ["s1"]  # the first checkout of stored memory opens it
        assert len(opened) == 1 and repos.cache is opened[0]
        write(repos, "s2")
        assert history(repos) == ["s2", "s1"]
        assert len(opened) == 1 and opened[0].stats["absorbed"] + opened[0].stats["hits"] >= 1
    finally:
        for cache in opened:
            cache.close()


def test_cache_root_of_a_dead_process_is_swept(tmp_path):
    root = tmp_path / "caches"
    code = (f"import sys; sys.path.insert(0, {str(ROOT / 'shared')!r})\n"
            "from pathlib import Path; from memrepo.repocache import RepoCache\n"
            f"c = RepoCache(Path({str(root)!r}), 1); (c.root / 'x').write_text('x')\n")
    subprocess.run([sys.executable, "-c", code], check=True)
    assert len(list(root.glob("p*"))) == 2  # a directory and its .alive lock, left behind
    cache = RepoCache(root, 1)
    assert set(root.iterdir()) == {cache.root, Path(f"{cache.root}.alive")}
    cache.close()
    assert os.listdir(root) == []
