"""The LLM retrieval agent through the real ``openai`` client against the scripted server.

A normal exploration, a model that never stops, one that sends forbidden commands, one that
answers broken JSON or an invalid plan, one slower than the deadline, HTTP errors; the profile
added when the plan forgets it; git pointers through the sandbox; the budget under agent plans.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fakes import InMemoryStore
from helpers import event
from memrepo import tokens
from memrepo.events import parse_session_ended
from memrepo.llm.client import OpenAIChat
from memrepo.repos import UserRepos
from memrepo.retrieval import Plan, Pointer, resolve
from memrepo.retrieval.agent import AgentFailed, RetrievalAgent, with_profile
from memrepo.retrieval.agent_prompt import MANIFEST_COMMAND, PROBE_COMMAND
from memrepo.retrieval.resolver import sandbox_git_command
from memrepo.retrieval.service import Retriever
from memrepo.writer import DeterministicWriter, SessionWriter
from scripted_openai import JSONReply, Malformed, ScriptedOpenAI, Slow, Status, ToolCalls

SESSIONS = [
    (
        "s1",
        "2024-03-01T10:00:00+00:00",
        "My sister Sarah is getting surgery on her knee next month.",
    ),
    (
        "s2",
        "2024-03-15T10:00:00+00:00",
        "I started training for the Berlin marathon with coach Tom.",
    ),
    (
        "s3",
        "2024-04-02T10:00:00+00:00",
        "Sarah's surgery went well, she is resting with her cat Miso.",
    ),
    ("s4", "2024-04-20T10:00:00+00:00", "Work is busy: the coffee roastery launch moved to June."),
]
QUESTION = [{"role": "user", "content": "How is my sister doing after the operation?"}]

PLAN = {
    "pointers": [
        {
            "kind": "file_section",
            "path": "sessions/2024/04/s3.md",
            "start_line": 6,
            "end_line": 9,
            "reason": "the surgery went well (2024-04-02)",
            "priority": "must",
            "est_tokens": 60,
        },
        {
            "kind": "git_diff",
            "path": "memories/people/sarah.md",
            "rev": "HEAD~3..",
            "reason": "what changed about Sarah lately",
            "score": 2.0,
        },
        {
            "kind": "git_log",
            "path": "timeline/2024-04.md",
            "count": 2,
            "reason": "the latest sessions",
            "score": 1.0,
        },
    ],
    "notes": "Sarah is the sister; the operation is the knee surgery",
}


@pytest.fixture(scope="module")
def repos() -> UserRepos:
    repos = UserRepos(InMemoryStore())
    writer = SessionWriter(repos, DeterministicWriter())
    for sid, when, text in SESSIONS:
        turns = [
            {"speaker": "Ana", "role": "user", "content": text},
            {"speaker": "Bot", "role": "assistant", "content": "Thanks for telling me."},
        ]
        writer.write(parse_session_ended(event(session_id=sid, occurred_at=when, turns=turns)))
    return repos


def agent_for(srv: ScriptedOpenAI, **kw) -> RetrievalAgent:
    chat = OpenAIChat(
        base_url=srv.base_url,
        model="m-retrieval",
        api_key="k",
        timeout_s=60.0,
        max_retries=kw.pop("max_retries", 2),
        backoff_s=0.01,
        max_repairs=1,
    )
    return RetrievalAgent(chat, **kw)


def ask(repos, srv, deadline_s=8.0, max_tokens=800, **kw):
    retriever = Retriever(repos, agent=agent_for(srv, **kw))
    started = time.monotonic()
    result = retriever.context("ana", QUESTION, max_tokens, deadline_s=deadline_s)
    return result, time.monotonic() - started


def run(command: str) -> ToolCalls:
    return ToolCalls([("run", {"command": command})])


def tool_messages(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


def assert_valid_deterministic(result, code: str, max_tokens: int = 800) -> None:
    assert result.engine == "deterministic"
    assert result.fallback_reason and result.fallback_reason.startswith(f"{code}: ")
    assert 0 < result.tokens_used == tokens.count(result.text) <= max_tokens
    assert result.blocks[0].source.startswith("profile.md")


# -- the normal path ----------------------------------------------------------------------------


def test_three_turn_exploration_resolves_what_the_plan_named(repos, scripted_openai):
    scripted_openai.script(
        run("grep -n -i 'sister\\|surgery' memories/people/*.md timeline/*.md"),
        run(
            "head -30 memories/people/sarah.md; grep -n surgery sessions/2024/*/*.md; "
            "git diff HEAD~3.. -- memories/people/sarah.md; "
            "git log --stat -5 -- timeline/2024-04.md"
        ),
        JSONReply(PLAN, usage=(900, 120)),
    )
    result, _ = ask(repos, scripted_openai)

    assert result.engine == "llm" and result.fallback_reason is None
    sources = [b.source for b in result.blocks]
    assert sources == [
        "profile.md#L1-L12",  # always loaded: added because the plan forgot it
        "sessions/2024/04/s3.md#L6-L9",
        "git diff HEAD~3.. -- memories/people/sarah.md",
        "git log --stat -2 -- timeline/2024-04.md",
    ]
    assert "Sarah's surgery went well" in result.text
    assert "diff --git a/memories/people/sarah.md" in result.text
    assert "Session s4" in result.text and "Session s2" not in result.text  # git log -2
    assert "marathon" not in result.text.split("### ")[2]
    assert result.tokens_used == tokens.count(result.text) <= 800

    meta = result.metadata
    assert (meta["turns"], meta["llm_calls"], meta["commands"], meta["refused"]) == (3, 3, 4, 0)
    assert meta["llm_tokens_out"] >= 120 and meta["llm_tokens_in"] >= 900
    assert meta["model"] == "m-retrieval" and meta["prefetch"] is True
    for phase in ("agent_prefetch_ms", "agent_llm_ms", "agent_commands_ms", "resolve_ms"):
        assert meta["timings_ms"][phase] >= 0

    first, second, third = scripted_openai.requests
    assert all(r["tools"][0]["function"]["name"] == "run" for r in (first, second, third))
    system, user = first["messages"][0]["content"], first["messages"][1]["content"]
    nonce = user.split("<<<DATA-", 1)[1].split("\n", 1)[0]
    assert f"<<<DATA-{nonce}" in system and "never" in system and '"pointers"' in system
    assert f"$ {MANIFEST_COMMAND}" in user and "| Sarah |" in user
    assert f"$ {PROBE_COMMAND}" in user and "memories/people/sarah.md" in user
    assert "How is my sister doing" in user
    grep_output = tool_messages(second)[0]
    assert grep_output.startswith("exit 0\n<<<DATA-" + nonce)
    assert "memories/people/sarah.md:5:" in grep_output
    chained = tool_messages(third)[1]
    assert "# Sarah" in chained and "diff --git" in chained and "Session s4" in chained


def test_profile_is_made_must_and_first():
    optional = Plan(
        pointers=[
            Pointer(kind="file", path="memories/people/sarah.md", reason="x", priority="must"),
            Pointer(kind="file", path="profile.md", reason="who", priority="optional"),
        ]
    )
    fixed = with_profile(optional, has_profile=True)
    assert [(p.path, p.priority) for p in fixed.pointers] == [
        ("profile.md", "must"),
        ("memories/people/sarah.md", "must"),
    ]
    assert with_profile(fixed, has_profile=True) == fixed
    diff_only = Plan(
        pointers=[
            Pointer(kind="git_diff", path="profile.md", rev="HEAD~1..", reason="d", priority="must")
        ]
    )
    assert [p.kind for p in with_profile(diff_only, has_profile=True).pointers] == [
        "file_section",
        "git_diff",
    ]
    assert with_profile(Plan(), has_profile=False) == Plan()


def test_final_answer_in_a_fence_is_accepted(repos, scripted_openai):
    scripted_openai.script(
        run("grep -n surgery sessions/2024/04/s3.md"),
        Malformed("Here is the plan:\n```json\n" + json.dumps(PLAN) + "\n```"),
    )
    result, _ = ask(repos, scripted_openai)
    assert result.engine == "llm" and result.metadata["turns"] == 2


# -- models that misbehave -------------------------------------------------------------------


def test_model_that_never_stops_ends_at_the_turn_limit(repos, scripted_openai):
    scripted_openai.default = run("cat profile.md")
    result, elapsed = ask(repos, scripted_openai, max_turns=4)
    assert_valid_deterministic(result, "turn_limit")
    assert "Sarah" in result.text
    assert scripted_openai.calls == 4 and result.metadata["turns"] == 4
    assert result.metadata["commands"] == 2 + 3  # prefetch, then one per turn but the last
    last = scripted_openai.last_request["messages"]
    assert last[-1]["role"] == "user" and "last turn" in last[-1]["content"]
    assert elapsed < 8.0


FORBIDDEN = [
    "cat ../other-user/profile.md",
    "git log -1 > profile.md; touch pwned",
    "git -c alias.x='!touch pwned' x",
    "grep -n x $(cat profile.md)",
    "find . -exec touch pwned \\;",
]


def test_forbidden_commands_are_refused_and_fed_back(repos, scripted_openai, tmp_path):
    scripted_openai.script(
        ToolCalls([("run", {"command": c}) for c in FORBIDDEN[:4]]),
        ToolCalls([("run", {"command": FORBIDDEN[4]}), ("bash", {"command": "id"})]),
        JSONReply(PLAN),
    )
    result, _ = ask(repos, scripted_openai)
    assert result.engine == "llm" and result.fallback_reason is None
    assert result.metadata["refused"] == 5 and result.metadata["commands"] == 2 + 5
    answers = (
        tool_messages(scripted_openai.requests[1]) + tool_messages(scripted_openai.requests[2])[4:]
    )
    assert len(answers) == 6
    assert all(a.startswith("refused: nothing ran") for a in answers[:5])
    assert "outside the repository" in answers[0]
    assert "no tool `bash`" in answers[5]
    assert not Path("pwned").exists() and not (tmp_path / "pwned").exists()


def test_too_many_calls_in_one_turn_are_not_run(repos, scripted_openai):
    scripted_openai.script(
        ToolCalls([("run", {"command": f"head -{n} profile.md"}) for n in range(1, 7)]),
        JSONReply(PLAN),
    )
    result, _ = ask(repos, scripted_openai, max_commands_per_turn=4)
    assert result.engine == "llm" and result.metadata["commands"] == 2 + 4
    answers = tool_messages(scripted_openai.last_request)
    assert [a.startswith("not run") for a in answers] == [False] * 4 + [True] * 2


@pytest.mark.parametrize(
    "answer",
    [
        Malformed('{"pointers": [{"kind": "file", "path": '),
        JSONReply({"pointers": [{"kind": "shell", "path": "x", "reason": "r"}]}),
        JSONReply({"pointers": [{"kind": "file", "path": "../bob/profile.md", "reason": "r"}]}),
        JSONReply({"pointers": [{"kind": "git_diff", "path": "a.md", "rev": "--output=x"}]}),
    ],
    ids=["broken-json", "unknown-kind", "path-escapes", "rev-option"],
)
def test_invalid_plan_falls_back(repos, scripted_openai, answer):
    scripted_openai.script(run("grep -n surgery timeline/*.md"))
    scripted_openai.default = answer
    result, _ = ask(repos, scripted_openai)
    assert_valid_deterministic(result, "bad_plan")
    assert "Sarah" in result.text
    assert scripted_openai.calls == 3  # the answer, then one repair round
    assert result.metadata["turns"] == 2 and result.metadata["llm_calls"] == 3


def test_model_slower_than_the_deadline(repos, scripted_openai):
    scripted_openai.default = Slow(10, JSONReply(PLAN))
    result, elapsed = ask(repos, scripted_openai, deadline_s=1.2)
    assert_valid_deterministic(result, "deadline")
    assert elapsed < 1.2 and result.elapsed_ms < 1200
    assert scripted_openai.calls == 1  # no retry past the deadline
    assert result.metadata["turns"] == 1 and result.metadata["timings_ms"]["agent_ms"] < 900


def test_slow_second_turn_hits_the_deadline(repos, scripted_openai):
    scripted_openai.script(run("grep -n surgery timeline/*.md"), Slow(10, JSONReply(PLAN)))
    result, elapsed = ask(repos, scripted_openai, deadline_s=1.5)
    assert_valid_deterministic(result, "deadline")
    assert elapsed < 1.5
    assert result.metadata["turns"] == 2 and result.metadata["commands"] == 3


@pytest.mark.parametrize(
    ("status", "code"),
    [(Status(401), "llm_rejected"), (Status(503), "llm_unavailable")],
)
def test_http_errors_fall_back(repos, scripted_openai, status, code):
    scripted_openai.default = status
    result, _ = ask(repos, scripted_openai, max_retries=1)
    assert_valid_deterministic(result, code)


def test_no_llm_call_without_time_left(repos, scripted_openai):
    ws, _ = repos.checkout("ana")
    with ws, pytest.raises(AgentFailed) as failed:
        agent_for(scripted_openai).plan(ws, QUESTION, 500, time.monotonic() + 0.1)
    assert failed.value.code == "deadline"
    assert scripted_openai.calls == 0
    assert failed.value.metadata["turns"] == 0


def test_deadline_reached_during_hydration_skips_the_agent(repos, scripted_openai):
    retriever = Retriever(repos, agent=agent_for(scripted_openai), fallback_reserve_s=5.0)
    result = retriever.context("ana", QUESTION, 500, deadline_s=1.0)
    assert_valid_deterministic(result, "deadline", 500)
    assert scripted_openai.calls == 0


# -- the resolver with agent plans -------------------------------------------------------------


def test_git_pointer_commands_are_quoted():
    diff = Pointer(
        kind="git_diff", path="memories/people/zoë o'neil.md", rev="HEAD~2..", reason="r"
    )
    assert sandbox_git_command(diff) == (
        "git diff --no-ext-diff --no-textconv --no-color 'HEAD~2..' -- "
        "'memories/people/zoë o'\"'\"'neil.md'"
    )
    log = Pointer(kind="git_log", path="a b.md", count=3, reason="r")
    assert sandbox_git_command(log) == "git log --no-color --stat -3 -- 'a b.md'"


def test_git_pointers_that_fail_are_skipped(repos):
    ws, _ = repos.checkout("ana")
    with ws:
        plan = Plan(
            pointers=[
                Pointer(kind="git_diff", path="profile.md", rev="HEAD~40..", reason="too far"),
                Pointer(kind="git_log", path="profile.md", count=1, reason="ok", score=-1),
            ]
        )
        resolved = resolve(ws, plan, 1000)
        late = resolve(ws, plan, 1000, deadline=time.monotonic() - 1)
    assert [b.source for b in resolved.blocks] == ["git log --stat -1 -- profile.md"]
    assert resolved.skipped == 1
    assert late.blocks == () and late.skipped == 2


@pytest.mark.parametrize("budget", [30, 60, 100, 200, 400, 3000])
def test_agent_plans_never_exceed_the_budget(repos, budget):
    plan = with_profile(Plan.model_validate(PLAN), has_profile=True)
    plan = plan.model_copy(
        update={
            "pointers": [
                *plan.pointers,
                Pointer(kind="file", path="timeline/2024-03.md", reason="month", priority="must"),
                Pointer(kind="git_log", path="profile.md", count=20, reason="all", score=0.5),
            ]
        }
    )
    ws, _ = repos.checkout("ana")
    with ws:
        resolved = resolve(ws, plan, budget)
    assert resolved.tokens_used == tokens.count(resolved.text) <= budget
    if budget >= 60:
        assert resolved.blocks[0].source == "profile.md#L1-L12"
    for block in resolved.blocks:
        assert block.cut == block.text.endswith("[… cut to fit the token budget]\n")
    if budget < 3000:
        assert any(b.cut for b in resolved.blocks) or resolved.skipped
