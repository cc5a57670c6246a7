"""Reverting one session: exactly its facts go, the others stay; conflicts are refused unchanged."""

from __future__ import annotations

import pytest
from fakes import InMemoryStore
from helpers import event
from memrepo import index as index_md
from memrepo.events import parse_session_ended
from memrepo.gitcli import git_text
from memrepo.operations.apply import RepoChanger
from memrepo.operations.revert import RevertConflict, SessionNotFound, revert
from memrepo.repos import UserRepos
from memrepo.writer import DeterministicWriter, SessionWriter
from memrepo.writer.base import CommitPlan, WriterEngine


def _turns(user: str, bot: str) -> list[dict[str, str]]:
    return [{"speaker": "Ana", "role": "user", "content": user},
            {"speaker": "Bot", "role": "other", "content": bot}]  # a third party: a person file


S1 = _turns("My sister Sarah starts at the bakery on Monday.", "Congratulations to Sarah!")
S2 = _turns("My friend Tom plays chess. I'm learning the violin since March.", "Fun!")
S3 = _turns("My sister Sarah got the job at the bakery. I'm so proud of her.", "Great!")


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


def three_sessions(store: InMemoryStore, engine: WriterEngine | None = None) -> SessionWriter:
    writer = SessionWriter(UserRepos(store), engine or DeterministicWriter(), sleep=lambda s: None)
    for n, turns in enumerate((S1, S2, S3), start=1):
        writer.write(parse_session_ended(
            event(session_id=f"s{n}", occurred_at=f"2024-05-0{n}T09:00:00+00:00", turns=turns)))
    return writer


def tree(repos: UserRepos, user: str = "ana") -> dict[str, str]:
    ws, _ = repos.checkout(user)
    with ws:
        return {p: ws.read(p) or "" for p in ws.files()}


def changer(store: InMemoryStore) -> RepoChanger:
    return RepoChanger(UserRepos(store), sleep=lambda s: None)


def test_reverting_the_middle_session_removes_exactly_its_facts(store):
    three_sessions(store)
    before = tree(UserRepos(store))
    result = revert(changer(store), "ana", "s2")
    assert result.status == "reverted" and result.attempts == 1
    after = tree(UserRepos(store))

    # what s2 brought is gone: its transcript, Tom, its timeline entry, its profile statement
    assert "sessions/2024/05/s2.md" not in after and "memories/people/tom.md" not in after
    everything = "\n".join(after.values())
    for fact in ("Tom", "violin", "chess", "· s2 ·", "· s2\n", "s2.md"):
        assert fact not in everything
    # what s1 and s3 brought stays, unchanged where s2 did not touch
    for path in ("sessions/2024/05/s1.md", "sessions/2024/05/s3.md", "memories/people/sarah.md"):
        assert after[path] == before[path]
    assert "· s1\n" in after["timeline/2024-05.md"] and "· s3\n" in after["timeline/2024-05.md"]
    assert "I'm so proud of her." in after["profile.md"]
    assert '"sessions": 2' not in after["profile.md"] and "sessions: 2\n" in after["profile.md"]
    assert 'last_session: "s3"' in after["memories/people/bot.md"]
    assert "- 2024-05-01 · s1 ·" in after["memories/people/bot.md"]
    # the index matches the entity files
    entities = {p: t for p, t in after.items() if p.startswith("memories/")}
    assert after["index.md"] == index_md.render(entities)

    ws, _ = UserRepos(store).checkout("ana")
    with ws:
        body = git_text(["log", "-1", "--format=%B"], ws.path)
        assert "Reverts-Session: s2\n" in body
        assert f"Reverts-Commit: {result.reverted_commit}\n" in body
        # one new commit on top; the session's commit stays in history
        assert git_text(["rev-list", "--count", "HEAD"], ws.path).strip() == "4"
        assert ws.find_session("s2") is not None


def test_revert_is_idempotent_and_a_redelivery_stays_reverted(store):
    writer = three_sessions(store)
    first = revert(changer(store), "ana", "s2")
    puts = [c for c in store.calls if c[0] == "put"]
    again = revert(changer(store), "ana", "s2")
    assert again.status == "already-reverted" and again.commit == first.commit
    assert [c for c in store.calls if c[0] == "put"] == puts
    redelivered = writer.write(parse_session_ended(
        event(session_id="s2", occurred_at="2024-05-02T09:00:00+00:00", turns=S2)))
    assert redelivered.status == "duplicate"
    assert "memories/people/tom.md" not in tree(UserRepos(store))


def test_reverting_the_last_session_restores_the_previous_tree(store):
    three_sessions(store)
    ws, _ = UserRepos(store).checkout("ana")
    with ws:
        previous = git_text(["rev-parse", "HEAD~1^{tree}"], ws.path).strip()
    revert(changer(store), "ana", "s3")
    ws, _ = UserRepos(store).checkout("ana")
    with ws:
        assert git_text(["rev-parse", "HEAD^{tree}"], ws.path).strip() == previous


class JobEngine(WriterEngine):
    """A tiny engine that keeps one fact line, rewritten by each session: later edits conflict."""

    name = "job-test"

    def prepare(self, ws, event):
        job = event.turns[0].content
        return CommitPlan(
            files={f"sessions/{event.session_id}.md": job + "\n",
                   "memories/contexts/job.md": f"# Job\n\nWorks as: {job}\n"},
            message=f"job {event.session_id}", writer=self.name)


def test_a_conflicting_revert_is_refused_and_changes_nothing(store):
    writer = SessionWriter(UserRepos(store), JobEngine(), sleep=lambda s: None)
    for n, job in enumerate(("teacher", "baker", "nurse"), start=1):
        writer.write(parse_session_ended(event(
            session_id=f"s{n}", occurred_at=f"2024-05-0{n}T09:00:00+00:00",
            turns=[{"speaker": "Ana", "role": "user", "content": job}])))
    stored = dict(store.objects)
    puts = [c for c in store.calls if c[0] == "put"]
    with pytest.raises(RevertConflict, match=r"contexts/job.md: lines 3-3 were changed by a later"):
        revert(changer(store), "ana", "s2")
    assert store.objects == stored
    assert [c for c in store.calls if c[0] == "put"] == puts


def test_unknown_session_is_a_permanent_error(store):
    three_sessions(store)
    with pytest.raises(SessionNotFound, match="s9"):
        revert(changer(store), "ana", "s9")


def test_revert_reapplies_after_losing_a_race(store):
    writer = three_sessions(store)
    raced: list[bool] = []

    def concurrent(op: str, key: str) -> None:
        if op == "put" and not raced:
            raced.append(True)
            store.before = None
            writer.write(parse_session_ended(event(
                session_id="s4", occurred_at="2024-05-04T09:00:00+00:00",
                turns=_turns("My cousin Lea visits in June.", "Lovely."))))
            store.before = concurrent

    store.before = concurrent
    result = revert(changer(store), "ana", "s2")
    assert result.attempts == 2
    after = tree(UserRepos(store))
    assert "memories/people/lea.md" in after and "memories/people/tom.md" not in after


def test_reverting_the_first_session_is_refused_when_later_ones_built_on_its_files(store):
    three_sessions(store)
    with pytest.raises(RevertConflict, match="profile.md: the session created it"):
        revert(changer(store), "ana", "s1")


def test_files_the_session_created_keep_what_later_sessions_added(store):
    writer = SessionWriter(UserRepos(store), DeterministicWriter(), sleep=lambda s: None)
    script = [("s1", "2024-05-30", S1),
              ("s2", "2024-06-02", _turns("My friend Tom plays chess.", "Fun!")),
              ("s3", "2024-06-09", _turns("Tom and my friend Tom's sister Lea won.", "Wow!"))]
    for sid, day, turns in script:
        writer.write(parse_session_ended(event(session_id=sid, occurred_at=f"{day}T09:00:00+00:00",
                                               turns=turns)))
    result = revert(changer(store), "ana", "s2")
    assert {"memories/people/tom.md", "timeline/2024-06.md"} <= set(result.merged)
    after = tree(UserRepos(store))
    june = after["timeline/2024-06.md"]
    assert june.startswith("# Timeline 2024-06\n\n## 2024-06-09 09:00 · s3\n")
    assert "· s2" not in june and june.count("## ") == 1
    tom = after["memories/people/tom.md"]  # s2 created it, s3 mentioned Tom again
    assert "· s2 ·" not in tom and "- 2024-06-09 · s3 ·" in tom and 'name: "Tom"' in tom


def test_a_month_file_only_the_session_wrote_is_deleted(store):
    writer = SessionWriter(UserRepos(store), DeterministicWriter(), sleep=lambda s: None)
    for sid, day in (("s1", "2024-05-01"), ("s2", "2024-06-01"), ("s3", "2024-05-02")):
        writer.write(parse_session_ended(event(session_id=sid, occurred_at=f"{day}T09:00:00+00:00",
                                               turns=S1)))
    revert(changer(store), "ana", "s2")
    after = tree(UserRepos(store))
    assert "timeline/2024-06.md" not in after and "timeline/2024-05.md" in after
