"""One contract suite for every BundleStore: the in-memory fake, the filesystem store, and (in
test_stack_*.py) Cloud Storage on fake-gcs-server."""

from __future__ import annotations

import threading

import pytest
from fakes import InMemoryStore
from memrepo.errors import PreconditionFailed
from memrepo.store import BundleStore, FilesystemStore, StoreConfigError, open_store


def contract(store: BundleStore) -> None:
    """The behaviour every store must show (called by each backend's test)."""
    assert store.get("users/a/memory.bundle") is None
    g1 = store.put("users/a/memory.bundle", b"one", if_generation_match=0)
    assert g1 > 0
    got = store.get("users/a/memory.bundle")
    assert got is not None and got.data == b"one" and got.generation == g1
    with pytest.raises(PreconditionFailed):
        store.put("users/a/memory.bundle", b"two", if_generation_match=0)
    with pytest.raises(PreconditionFailed):
        store.put("users/a/memory.bundle", b"two", if_generation_match=g1 + 12345)
    g2 = store.put("users/a/memory.bundle", b"two", if_generation_match=g1)
    assert g2 != g1
    assert store.get("users/a/memory.bundle").data == b"two"  # type: ignore[union-attr]
    store.put("users/ab/memory.bundle", b"x", if_generation_match=0)
    assert store.list("users/a/") == ["users/a/memory.bundle"]
    assert store.delete("users/a/memory.bundle", all_versions=True) >= 1
    assert store.get("users/a/memory.bundle") is None
    assert store.list("users/") == ["users/ab/memory.bundle"]
    for bad in ("../x", "/abs", "a//b", "a/../b", ""):
        with pytest.raises(ValueError):
            store.get(bad)

    # purge: every version under one prefix, nothing beside it
    store.put("users/p/one", b"1", if_generation_match=0)
    g = store.put("users/p/two", b"2", if_generation_match=0)
    store.put("users/p/two", b"2b", if_generation_match=g)
    assert store.purge("users/p/") >= 2
    assert store.list("users/p/") == []
    assert store.list("users/") == ["users/ab/memory.bundle"]
    with pytest.raises(ValueError):
        store.purge("")

    # two writers racing on one generation: exactly one wins
    base = store.put("race", b"0", if_generation_match=0)
    wins: list[int] = []
    losses: list[int] = []

    def racer(n: int) -> None:
        try:
            store.put("race", str(n).encode(), if_generation_match=base)
            wins.append(n)
        except PreconditionFailed:
            losses.append(n)

    threads = [threading.Thread(target=racer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1 and len(losses) == 7


def test_in_memory_fake():
    contract(InMemoryStore())


def test_filesystem_store(tmp_path):
    contract(FilesystemStore(tmp_path))


def test_filesystem_store_never_exposes_half_written_objects(tmp_path):
    store = FilesystemStore(tmp_path)
    store.put("k", b"a" * 1000, if_generation_match=0)
    leftovers = [p for p in tmp_path.rglob(".tmp-*")]
    assert leftovers == []


def test_open_store_urls(tmp_path):
    assert isinstance(open_store(tmp_path.as_uri()), FilesystemStore)
    assert open_store("gs://bucket/some/prefix").url == "gs://bucket/some/prefix"  # type: ignore[union-attr]
    for bad in ("s3://bucket", "gs://", "file://host/path"):
        with pytest.raises(StoreConfigError):
            open_store(bad)
