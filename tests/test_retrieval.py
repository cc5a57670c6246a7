"""Deterministic retrieval and the resolver: budgets, labels, pointers, empty memory."""

from __future__ import annotations

import pytest
from fakes import InMemoryStore
from helpers import event
from memrepo import tokens
from memrepo.errors import InvalidRequest
from memrepo.events import parse_session_ended
from memrepo.repos import UserRepos
from memrepo.retrieval import Plan, Pointer, deterministic, resolve
from memrepo.retrieval.deterministic import query_terms
from memrepo.retrieval.service import Retriever
from memrepo.workspace import Workspace
from memrepo.writer import DeterministicWriter, SessionWriter

SESSIONS = [
    (
        "s1",
        "2024-03-01T10:00:00+00:00",
        "My sister Sarah is getting surgery on her knee next month.",
    ),
    (
        "s2",
        "2024-03-15T10:00:00+00:00",
        "I started training for the Berlin marathon with my coach Tom.",
    ),
    (
        "s3",
        "2024-04-02T10:00:00+00:00",
        "Sarah's surgery went well, she is resting at home with her cat Miso.",
    ),
    ("s4", "2024-04-20T10:00:00+00:00", "Work is busy: the coffee roastery launch moved to June."),
]


@pytest.fixture(scope="module")
def repos() -> UserRepos:
    repos = UserRepos(InMemoryStore())
    writer = SessionWriter(repos, DeterministicWriter())
    for sid, when, text in SESSIONS:
        writer.write(
            parse_session_ended(
                event(
                    session_id=sid,
                    occurred_at=when,
                    turns=[
                        {"speaker": "Ana", "role": "user", "content": text},
                        {
                            "speaker": "Bot",
                            "role": "assistant",
                            "content": "Thanks for telling me.",
                        },
                    ],
                )
            )
        )
    return repos


def ask(repos, text, max_tokens=800):
    return Retriever(repos).context("ana", [{"role": "user", "content": text}], max_tokens)


def test_finds_the_sessions_that_matter(repos):
    result = ask(repos, "How did Sarah's knee surgery go?")
    assert "Sarah's surgery went well" in result.text
    assert "getting surgery on her knee" in result.text
    assert "marathon" not in result.text
    assert result.engine == "deterministic" and result.fallback_reason is None


def test_blocks_are_labelled_with_source_and_reason(repos):
    result = ask(repos, "Is the coffee roastery launch still in June?")
    sources = [b.source for b in result.blocks]
    assert sources[0].startswith("profile.md")
    session_blocks = [b for b in result.blocks if b.source.startswith("sessions/2024/04/s4.md#L")]
    assert session_blocks and "said on 2024-04-20" in session_blocks[0].reason
    assert "roastery" in session_blocks[0].reason or "coffee" in session_blocks[0].reason
    for block in result.blocks:
        assert f"### {block.source} — {block.reason}" in result.text


@pytest.mark.parametrize("budget", [1, 10, 30, 60, 120, 250, 800, 4000])
def test_budget_is_never_exceeded(repos, budget):
    result = ask(
        repos, "Tell me about Sarah, Tom, the marathon, surgery, the cat and coffee work", budget
    )
    assert result.tokens_used == tokens.count(result.text) <= budget
    assert sum(b.tokens for b in result.blocks) >= result.tokens_used - len(result.blocks)


def test_cut_blocks_are_marked(repos):
    ws, _ = repos.checkout("ana")
    with ws:
        plan = Plan(
            pointers=[
                Pointer(kind="file", path="sessions/2024/03/s1.md", reason="test", priority="must")
            ]
        )
        resolved = resolve(ws, plan, 60)
    assert resolved.blocks and resolved.blocks[0].cut
    assert "cut to fit the token budget" in resolved.text
    assert resolved.tokens_used <= 60


def test_resolver_skips_paths_outside_the_repo(repos):
    ws, _ = repos.checkout("ana")
    with ws:
        (ws.path / "escape.md").symlink_to("/etc/hostname")
        plan = Plan(
            pointers=[
                Pointer(kind="file", path="escape.md", reason="x"),
                Pointer(kind="file", path="missing.md", reason="x"),
            ]
        )
        resolved = resolve(ws, plan, 500)
    assert resolved.blocks == () and resolved.skipped == 2


def test_git_pointers_resolve(repos):
    ws, _ = repos.checkout("ana")
    with ws:
        plan = Plan(
            pointers=[
                Pointer(
                    kind="git_diff",
                    path="profile.md",
                    rev="HEAD~2..",
                    reason="recent change",
                    priority="must",
                ),
                Pointer(kind="git_log", path="timeline/2024-04.md", count=2, reason="history"),
            ]
        )
        resolved = resolve(ws, plan, 2000)
    assert "diff --git a/profile.md b/profile.md" in resolved.text
    assert "Session s4" in resolved.text


def test_plan_rejects_unsafe_fields():
    with pytest.raises(ValueError):
        Pointer(kind="file", path="../other/profile.md", reason="x")
    with pytest.raises(ValueError):
        Pointer(kind="git_diff", path="profile.md", rev="--output=/tmp/x", reason="x")
    with pytest.raises(ValueError):
        Pointer(kind="file_section", path="profile.md", start_line=5, end_line=2, reason="x")


def test_user_without_memory(repos):
    result = Retriever(repos).context("new-user", [{"role": "user", "content": "hi"}], 100)
    assert (result.text, result.blocks, result.tokens_used) == ("", (), 0)


def test_user_without_memory_gets_an_empty_repositorys_context_without_a_workspace(tmp_path):
    conversation = [{"role": "user", "content": "How is Sarah doing with the marathon?"}]
    work = tmp_path / "work"
    work.mkdir()
    repos = UserRepos(InMemoryStore(), tmp_root=work)
    assert repos.checkout_existing("new-user", read_only=True) is None
    result = Retriever(repos).context("new-user", conversation, 2000)
    assert list(work.iterdir()) == []  # no workspace, no git init
    # the same answer the deterministic plan and the resolver give an empty repository
    with Workspace.create("new-user", tmp_root=tmp_path) as ws:
        plan = deterministic.plan(ws, conversation, 2000)
        resolved = resolve(ws, plan, 2000)
    assert (result.text, result.blocks, result.tokens_used) == (
        resolved.text, resolved.blocks, resolved.tokens_used)
    assert (result.engine, result.fallback_reason) == ("deterministic", None)
    assert result.metadata["pointers"] == len(plan.pointers)
    assert result.metadata["skipped"] == resolved.skipped
    assert set(result.metadata["timings_ms"]) == {"hydrate_ms", "plan_ms", "resolve_ms"}
    assert set(result.to_json()) == {
        "context", "blocks", "tokens_used", "engine", "elapsed_ms", "metadata"}


@pytest.mark.parametrize("budget", [0, -1, 10_000_000, True, "5"])
def test_bad_budgets(repos, budget):
    with pytest.raises(InvalidRequest):
        Retriever(repos).context("ana", [], budget)


def test_query_terms_prefer_the_latest_user_message():
    terms = query_terms(
        [
            {"role": "user", "content": "old topic gardening"},
            {"role": "assistant", "content": "Sure, tell me more."},
            {"role": "user", "content": "What about the marathon training?"},
        ]
    )
    assert terms[:2] == ["marathon", "train"]
    assert "garden" in terms
