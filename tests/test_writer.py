"""The session writer on real git: layout, trailers, idempotency, ordering, conflicts, caps."""

from __future__ import annotations

import pytest
from fakes import InMemoryStore
from helpers import commits, event
from memrepo import frontmatter
from memrepo import index as index_md
from memrepo.errors import (
    ConflictRetriesExhausted,
    CorruptBundle,
    PreconditionFailed,
    SessionConflict,
)
from memrepo.events import parse_session_ended
from memrepo.gitcli import git_text
from memrepo.manifest import Manifest, Part
from memrepo.repos import UserRepos
from memrepo.writer import DeterministicWriter, SessionWriter, deterministic


@pytest.fixture
def store() -> InMemoryStore:
    return InMemoryStore()


@pytest.fixture
def writer(store) -> SessionWriter:
    return SessionWriter(UserRepos(store), DeterministicWriter(), sleep=lambda s: None)


def write(writer, **kw):
    return writer.write(parse_session_ended(event(**kw)))


def test_first_session_creates_the_layout(writer):
    result = write(writer)
    assert result.status == "committed" and result.attempts == 1
    ws, generation = writer.repos.checkout("ana")
    with ws:
        assert generation == result.generation
        assert ws.files() == [
            "index.md",
            "memories/people/sarah.md",
            "profile.md",
            "sessions/2024/05/s1.md",
            "timeline/2024-05.md",
        ]
        body = git_text(["log", "-1", "--format=%B"], ws.path)
        assert "Session-Id: s1\n" in body
        assert "Writer: deterministic\n" in body
        assert "Session-Digest: sha256:" in body
        assert git_text(["branch", "--list"], ws.path).split() == ["*", "user/ana"]
        assert git_text(["rev-list", "--max-parents=0", "HEAD"], ws.path).count("\n") == 1


def test_index_matches_entity_files_exactly(writer):
    write(writer)
    write(
        writer,
        session_id="s2",
        turns=[
            {
                "speaker": "Ana",
                "role": "user",
                "content": "My friend Tom and Sarah went hiking with Tom's dog.",
            },
        ],
    )
    ws, _ = writer.repos.checkout("ana")
    with ws:
        files = {p: ws.read(p) or "" for p in ws.files("memories/")}
        assert ws.read("index.md") == index_md.render(files)
        names = {frontmatter.split(t)[0]["name"] for t in files.values()}
        assert names == {"Sarah", "Tom"}  # the assistant is not a person of the user's life


def test_one_commit_per_session_even_when_redelivered(writer, store):
    write(writer)
    puts = len([c for c in store.calls if c[0] == "put"])
    assert write(writer).status == "duplicate"
    assert len([c for c in store.calls if c[0] == "put"]) == puts  # nothing uploaded again
    assert commits(writer.repos, "ana") == ["s1"]


def test_same_id_other_content_is_a_permanent_conflict(writer):
    write(writer)
    with pytest.raises(SessionConflict, match="digest"):
        write(writer, turns=[{"speaker": "Ana", "role": "user", "content": "different"}])


def test_out_of_order_sessions_are_placed_by_date(writer):
    write(writer, session_id="late", occurred_at="2024-05-20T10:00:00+00:00")
    write(writer, session_id="early", occurred_at="2024-05-02T10:00:00+00:00")
    write(writer, session_id="middle", occurred_at="2024-05-10T10:00:00+00:00")
    ws, _ = writer.repos.checkout("ana")
    with ws:
        timeline = ws.read("timeline/2024-05.md") or ""
    order = [line.split(" · ")[1] for line in timeline.splitlines() if line.startswith("## ")]
    assert order == ["early", "middle", "late"]


def test_precondition_conflict_reapplies_on_newer_state(store):
    writer = SessionWriter(UserRepos(store), DeterministicWriter(), sleep=lambda s: None)
    write(writer, session_id="s1")
    sneaked: list[bool] = []

    def concurrent_writer(op: str, key: str) -> None:
        if op == "put" and not sneaked:  # another instance lands s2 just before our upload
            sneaked.append(True)
            store.before = None
            other = SessionWriter(UserRepos(store), DeterministicWriter(), sleep=lambda s: None)
            other.write(parse_session_ended(event(session_id="s2")))
            store.before = concurrent_writer

    store.before = concurrent_writer
    result = write(writer, session_id="s3")
    assert result.attempts == 2
    assert commits(writer.repos, "ana") == ["s3", "s2", "s1"]


def test_conflict_bound_raises_transient(store):
    writer = SessionWriter(
        UserRepos(store), DeterministicWriter(), max_attempts=3, sleep=lambda s: None
    )

    def always_lose(op: str, key: str) -> None:
        if op == "put":
            raise PreconditionFailed("someone else was first")

    store.before = always_lose
    with pytest.raises(ConflictRetriesExhausted):
        write(writer)
    assert [c[0] for c in store.calls].count("put") == 3
    assert store.objects == {}


def test_users_are_isolated(writer, store):
    write(writer, user_id="ana")
    write(writer, user_id="bob", session_id="b1")
    assert {k.split("/")[1] for k in store.objects} == {"ana", "bob"}
    assert {"users/ana/manifest.json", "users/bob/manifest.json"} <= set(store.objects)
    ws, _ = writer.repos.checkout("bob")
    with ws:
        assert git_text(["for-each-ref", "--format=%(refname)"], ws.path).split() == [
            "refs/heads/user/bob"
        ]
        assert git_text(["log", "--format=%s"], ws.path).count("\n") == 1


def test_bundle_with_foreign_ref_is_refused(writer, store):
    write(writer, user_id="ana")
    ana = Manifest.from_bytes(store.objects["users/ana/manifest.json"].data, "ana")
    data = store.objects[ana.base.key].data
    store.put("users/bob/memory.bundle", data, if_generation_match=0)  # the legacy layout
    with pytest.raises(CorruptBundle, match="refs"):
        writer.repos.checkout("bob")
    store.delete("users/bob/memory.bundle")
    stolen = Part.of(
        "users/bob/bundles/0000000000001-base-" + "0" * 32 + ".bundle", ana.base.tip, data
    )
    store.put(stolen.key, data, if_generation_match=0)
    store.put("users/bob/manifest.json", Manifest("bob", stolen).to_bytes(), if_generation_match=0)
    with pytest.raises(CorruptBundle, match="refs"):
        writer.repos.checkout("bob")


def test_garbage_bundle_is_refused(store):
    from memrepo.store.base import StoredObject

    store.objects["users/ana/memory.bundle"] = StoredObject(b"not a bundle", 5)
    with pytest.raises(CorruptBundle):
        UserRepos(store).checkout("ana")


def test_person_file_is_condensed_not_truncated(writer, monkeypatch):
    cap = 1500
    monkeypatch.setattr(deterministic, "ENTITY_MAX_BYTES", cap)
    for n in range(25):
        write(
            writer,
            session_id=f"s{n:03d}",
            occurred_at=f"2024-05-01T{n % 24:02d}:{n:02d}:00+00:00",
            turns=[
                {"speaker": "Ana", "role": "user", "content": f"My sister Sarah won prize {n}."}
            ],
        )
    ws, _ = writer.repos.checkout("ana")
    with ws:
        text = ws.read("memories/people/sarah.md") or ""
        old = git_text(["show", "HEAD~20:memories/people/sarah.md"], ws.path)
    assert len(text.encode()) <= cap
    assert "earlier sessions condensed" in text
    assert "s000" in old and "s000" not in text  # the oldest entry left the file, not git history
    assert "s024" in text  # the newest entry is kept


def test_workspace_is_removed_after_write(writer, tmp_path):
    writer.repos.tmp_root = tmp_path
    write(writer)
    assert list(tmp_path.iterdir()) == []


def test_deterministic_session_keeps_other_sections_of_a_person_file(writer):
    write(writer)
    ws, _ = writer.repos.checkout("ana")
    with ws:
        text = ws.read("memories/people/sarah.md") or ""
    meta_end = text.index("\n---\n") + 5
    edited = (
        text[:meta_end].replace('type: "person"', 'type: "person"\nrelation: "sister"')
        + "# Sarah\n\n## Current\n- Works at the bakery since May.\n\n"
        + text[meta_end:].split("## Sessions\n", 1)[1].join(["## Sessions\n", ""])
        + "\n## Notes\n- Likes cardamom buns.\n"
    )
    from memrepo.writer.deterministic import DeterministicWriter as Engine

    class Keep(Engine):
        def prepare(self, ws, event):
            ws.write("memories/people/sarah.md", edited)
            return super().prepare(ws, event)

    SessionWriter(writer.repos, Keep(), sleep=lambda s: None).write(
        parse_session_ended(event(session_id="s2", occurred_at="2024-05-03T10:00:00+00:00"))
    )
    ws, _ = writer.repos.checkout("ana")
    with ws:
        text = ws.read("memories/people/sarah.md") or ""
    assert 'relation: "sister"' in text
    assert "## Current\n- Works at the bakery since May." in text
    assert "## Notes\n- Likes cardamom buns." in text
    sessions = text.split("## Sessions\n", 1)[1].split("\n## ", 1)[0]
    assert "· s1 ·" in sessions and "· s2 ·" in sessions


def test_profile_dates_and_statements_follow_session_dates_not_arrival(writer):
    for sid, when in [("march", "2024-03-01"), ("january", "2024-01-05"), ("may", "2024-05-09")]:
        write(
            writer,
            session_id=sid,
            occurred_at=f"{when}T10:00:00+00:00",
            turns=[
                {
                    "speaker": "Ana",
                    "role": "user",
                    "content": f"I am planning my {sid} garden party.",
                },
            ],
        )
    ws, _ = writer.repos.checkout("ana")
    with ws:
        meta, body = frontmatter.split(ws.read("profile.md") or "")
    assert (meta["first_date"], meta["last_date"], meta["sessions"]) == (
        "2024-01-05",
        "2024-05-09",
        3,
    )
    said = [line[2:12] for line in body.splitlines() if line.startswith("- 2")]
    assert said == ["2024-01-05", "2024-03-01", "2024-05-09"]
