"""Rebuild (replay) from transcripts: same files as writing one by one, history kept, resumable."""

from __future__ import annotations

import pytest
from fakes import InMemoryStore
from helpers import LOCOMO, event
from memrepo import locomo
from memrepo.events import parse_session_ended
from memrepo.gitcli import git_text
from memrepo.operations.apply import RepoChanger
from memrepo.operations.onboard import onboard
from memrepo.operations.rebuild import NothingToRebuild, Rebuilder, checkpoint_key
from memrepo.operations.revert import revert
from memrepo.repos import UserRepos
from memrepo.writer import DeterministicWriter, SessionWriter
from memrepo.writer.base import WriterEngine


def writer_for(store: InMemoryStore) -> SessionWriter:
    return SessionWriter(UserRepos(store), DeterministicWriter(), sleep=lambda s: None)


def rebuilder(store: InMemoryStore, engine: WriterEngine | None = None, **kw) -> Rebuilder:
    changer = RepoChanger(UserRepos(store), sleep=lambda s: None)
    return Rebuilder(changer, engine or DeterministicWriter(), store, **kw)


def git_out(store: InMemoryStore, user: str, *args: str) -> str:
    ws, _ = UserRepos(store).checkout(user)
    with ws:
        return git_text(list(args), ws.path)


def small_history(store: InMemoryStore, user: str = "ana", n: int = 4) -> None:
    writer = writer_for(store)
    people = ["Sarah", "Tom", "Lea", "Max", "Ines", "Ruth"]
    for k in range(n):
        writer.write(parse_session_ended(event(
            user_id=user, session_id=f"s{k}", occurred_at=f"2024-05-{k + 1:02d}T09:00:00+00:00",
            turns=[{"speaker": "Ana", "role": "user",
                    "content": f"My friend {people[k % 6]} and I went hiking on day {k}."}])))


@pytest.mark.skipif(not LOCOMO.exists(), reason=f"{LOCOMO} not present")
def test_rebuild_of_a_locomo_conversation_gives_the_same_files():
    store = InMemoryStore()
    item = next(i for i in locomo.load(LOCOMO) if i["sample_id"] == "conv-26")
    conv = locomo.conversation(item, "caroline")
    assert len(conv.events) == 19
    writer = writer_for(store)
    for e in sorted(conv.events, key=lambda e: e.occurred_at):
        writer.write(e)
    old_tip, old_tree = git_out(store, "caroline", "rev-parse", "HEAD", "HEAD^{tree}").split()
    seen = []
    result = rebuilder(store, checkpoint_every=4).rebuild("caroline", on_progress=seen.append)

    assert result.sessions == 19 and result.resumed_from == 0 and result.replaced == old_tip
    assert git_out(store, "caroline", "rev-parse", "HEAD^{tree}").strip() == old_tree
    parents = git_out(store, "caroline", "log", "-1", "--format=%P").split()
    assert parents[1] == old_tip  # the replaced history stays reachable, the push fast-forwards
    body = git_out(store, "caroline", "log", "-1", "--format=%B")
    assert f"Rebuilt-From: {old_tip}" in body and "Rebuild-Sessions: 19" in body
    lineage = git_out(store, "caroline", "log", "--first-parent", "--reverse",
                      "--format=%(trailers:key=Session-Id,valueonly)%x1e").split("\x1e")
    assert [x.strip() for x in lineage if x.strip()] == [e.session_id for e in conv.events]
    root = git_out(store, "caroline", "log", "--format=%B", "--max-parents=0", "HEAD^1")
    assert f"Rebuilt-From: {old_tip}" in root and "Rebuild-Writer: deterministic" in root
    assert git_out(store, "caroline", "for-each-ref", "--format=%(refname)").split() == [
        "refs/heads/user/caroline"]
    assert checkpoint_key("caroline") not in store.objects  # the checkpoint is gone
    assert [p.done for p in seen if p.stage == "replay"] == list(range(1, 20))
    assert sum(p.checkpointed for p in seen) == 4  # after 4, 8, 12, 16 (the last is the save)


class FailingAfter(WriterEngine):
    """Delegates to the deterministic engine and crashes on the ``n``-th session."""

    name = "deterministic"

    def __init__(self, n: int) -> None:
        self.inner, self.n, self.calls = DeterministicWriter(), n, 0

    def prepare(self, ws, e):
        self.calls += 1
        if self.calls == self.n:
            raise RuntimeError("crash in the middle of a rebuild")
        return self.inner.prepare(ws, e)


def test_a_failed_rebuild_resumes_from_its_checkpoint():
    store = InMemoryStore()
    small_history(store, n=6)
    before_tree = git_out(store, "ana", "rev-parse", "HEAD^{tree}").strip()
    before_tip = git_out(store, "ana", "rev-parse", "HEAD").strip()
    with pytest.raises(RuntimeError):
        rebuilder(store, FailingAfter(5), checkpoint_every=2).rebuild("ana")
    assert git_out(store, "ana", "rev-parse", "HEAD").strip() == before_tip  # live untouched
    assert checkpoint_key("ana") in store.objects
    result = rebuilder(store, checkpoint_every=2).rebuild("ana")
    assert result.resumed_from == 4 and result.sessions == 6
    assert git_out(store, "ana", "rev-parse", "HEAD^{tree}").strip() == before_tree


def test_a_checkpoint_of_another_engine_is_discarded():
    store = InMemoryStore()
    small_history(store, n=4)

    class Other(FailingAfter):
        name = "other-engine"

    with pytest.raises(RuntimeError):
        rebuilder(store, Other(3), checkpoint_every=1).rebuild("ana")
    assert rebuilder(store).rebuild("ana").resumed_from == 0


def test_sessions_written_during_a_rebuild_are_replayed_before_the_merge():
    store = InMemoryStore()
    small_history(store, n=3)

    class WritesMeanwhile(DeterministicWriter):
        calls = 0

        def prepare(self, ws, e):
            WritesMeanwhile.calls += 1
            if WritesMeanwhile.calls == 2:
                small_history_extra = parse_session_ended(event(
                    session_id="late", occurred_at="2024-06-01T09:00:00+00:00",
                    turns=[{"speaker": "Ana", "role": "user",
                            "content": "My friend Ruth called."}]))
                writer_for(store).write(small_history_extra)
            return super().prepare(ws, e)

    result = rebuilder(store, WritesMeanwhile()).rebuild("ana")
    assert result.sessions == 4
    files = git_out(store, "ana", "ls-files")
    assert "sessions/2024/06/late.md" in files and "memories/people/ruth.md" in files


def test_a_reverted_session_is_not_replayed_and_stays_deduplicated():
    store = InMemoryStore()
    small_history(store, n=4)
    revert(RepoChanger(UserRepos(store), sleep=lambda s: None), "ana", "s3")
    result = rebuilder(store).rebuild("ana")
    assert result.sessions == 3
    assert "memories/people/max.md" not in git_out(store, "ana", "ls-files")
    again = writer_for(store).write(parse_session_ended(event(
        session_id="s3", occurred_at="2024-05-04T09:00:00+00:00",
        turns=[{"speaker": "Ana", "role": "user",
                "content": "My friend Max and I went hiking on day 3."}])))
    assert again.status == "duplicate"


def test_an_onboarded_profile_survives_a_rebuild():
    store = InMemoryStore()
    changer = RepoChanger(UserRepos(store), sleep=lambda s: None)
    onboard(changer, "ana", "Works as a nurse in Porto.\nHas a cat named Miso.", name="Ana")
    small_history(store, n=2)
    profile = git_out(store, "ana", "show", "HEAD:profile.md")
    rebuilder(store).rebuild("ana")
    assert git_out(store, "ana", "show", "HEAD:profile.md") == profile
    assert "- profile: Has a cat named Miso." in profile


def test_nothing_to_rebuild():
    with pytest.raises(NothingToRebuild):
        rebuilder(InMemoryStore()).rebuild("nobody")
