"""GDPR/CCPA erasure and export of one user on a versioned store: every version of every object
of that user goes (noncurrent ones left by compaction included), nothing of anyone else."""

from __future__ import annotations

from fakes import InMemoryStore
from helpers import event
from memrepo.events import parse_session_ended
from memrepo.repos import UserRepos
from memrepo.writer import DeterministicWriter, SessionWriter


def test_delete_removes_noncurrent_versions_and_nothing_else():
    store = InMemoryStore()
    repos = UserRepos(store)
    writer = SessionWriter(repos, DeterministicWriter(), sleep=lambda s: None)
    for n in range(6):
        writer.write(parse_session_ended(event(user_id="ana", session_id=f"a{n}")))
        writer.write(parse_session_ended(event(user_id="bob", session_id=f"b{n}")))
    store.delete(repos.store.list("users/ana/")[-1])  # leaves a noncurrent version behind
    ana_versions = sum(1 for k in store.objects if k.startswith("users/ana/")) + sum(
        len(v) for k, v in store.noncurrent.items() if k.startswith("users/ana/")
    )
    bob = {k: v for k, v in store.objects.items() if k.startswith("users/bob/")}
    bob_old = {k: list(v) for k, v in store.noncurrent.items() if k.startswith("users/bob/")}
    assert any(k.startswith("users/ana/") for k in store.noncurrent)

    assert repos.delete("ana") == ana_versions
    assert not any(k.startswith("users/ana/") for k in [*store.objects, *store.noncurrent])
    assert {k: v for k, v in store.objects.items() if k.startswith("users/bob/")} == bob
    assert {k: v for k, v in store.noncurrent.items() if k.startswith("users/bob/")} == bob_old
    assert repos.export("ana") is None
    assert repos.export("bob") is not None
