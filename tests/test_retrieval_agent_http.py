"""The retrieval agent behind the HTTP function (in-process functions-framework) and the CLI.

The function is configured for the LLM engine on the scripted server; ``deadline_ms`` of the
request bounds everything, and ``memrepo run`` shows what the agent would see.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from functions_framework import create_app
from helpers import event
from memrepo import bootstrap, tokens
from memrepo.cli import app as cli_app
from memrepo.events import parse_session_ended
from memrepo.settings import Settings
from scripted_openai import JSONReply, Slow, ToolCalls, Trickle
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]
QUESTION = "When does my sister Sarah start at the bakery?"
PLAN = {
    "pointers": [
        {
            "kind": "file_section",
            "path": "sessions/2024/05/s1.md",
            "start_line": 6,
            "end_line": 9,
            "reason": "Sarah's new job",
            "priority": "must",
        }
    ]
}


@pytest.fixture
def store(tmp_path, monkeypatch) -> str:
    """A filesystem store holding one session of user ``ana`` (written deterministically)."""
    url = (tmp_path / "store").as_uri()
    writer = bootstrap.writer(Settings(store_url=url, engine="deterministic"))
    writer.write(parse_session_ended(event()))
    monkeypatch.setenv("MEMREPO_STORE", url)
    for name in ("MEMREPO_AUTH_TOKEN", "OPENROUTER_API_KEY", "MEMREPO_RETRIEVAL_DEADLINE_MS"):
        monkeypatch.delenv(name, raising=False)
    return url


@pytest.fixture
def llm_client(store, scripted_openai, monkeypatch):
    """The retrieval function's test client, its LLM engine on the scripted server."""
    monkeypatch.setenv("MEMREPO_ENGINE", "llm")
    monkeypatch.setenv("MEMREPO_LLM_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("MEMREPO_LLM_TIMEOUT_S", "30")
    app = create_app("get_context", str(ROOT / "functions" / "retrieval" / "main.py"), "http")
    for module in list(sys.modules.values()):  # settings are cached per instance: reset per test
        if str(getattr(module, "__file__", "")).endswith("functions/retrieval/main.py"):
            module._settings.cache_clear()
    return app.test_client()


def _post(client, user_id: str = "ana", **extra):
    body = {
        "user_id": user_id,
        "conversation": [{"role": "user", "content": QUESTION}],
        "max_tokens": 400,
        **extra,
    }
    return client.post("/", data=json.dumps(body), headers={"Content-Type": "application/json"})


def test_deadline_bounds_a_slow_llm(llm_client, scripted_openai):
    scripted_openai.default = Slow(10, JSONReply(PLAN))
    # a warm instance: the retriever and its LLM client (the openai SDK) built by a first request;
    # a user without memory loads no tokenizer, so load it as a request with memory would
    assert _post(llm_client, "nobody-yet").status_code == 200
    tokens.encoding()
    assert scripted_openai.calls == 0  # no memory: no agent

    started = time.monotonic()
    response = _post(llm_client, deadline_ms=1500)
    wall = time.monotonic() - started

    assert response.status_code == 200
    body = response.get_json()
    assert wall < 2.0, f"took {wall:.2f} s"
    assert body["engine"] == "deterministic"
    assert body["fallback_reason"].startswith("deadline: ")
    assert "Sarah starts at the bakery" in body["context"]
    assert 0 < body["tokens_used"] <= 400
    assert body["elapsed_ms"] < 1500
    assert body["metadata"]["turns"] == 1 and scripted_openai.calls == 1


def test_deadline_bounds_an_llm_that_trickles_its_answer(llm_client, scripted_openai):
    # a byte every 20 ms: never a read timeout, ~1 minute for the whole answer
    scripted_openai.default = Trickle(0.02, JSONReply(PLAN))
    # a warm instance: the retriever and its LLM client (the openai SDK) built by a first request;
    # a user without memory loads no tokenizer, so load it as a request with memory would
    assert _post(llm_client, "nobody-yet").status_code == 200
    tokens.encoding()

    started = time.monotonic()
    response = _post(llm_client, deadline_ms=1500)
    wall = time.monotonic() - started

    body = response.get_json()
    assert response.status_code == 200 and wall < 2.0, f"took {wall:.2f} s"
    assert body["engine"] == "deterministic"
    assert body["fallback_reason"] == "deadline: LLM openai/gpt-4o-mini: request timed out"
    assert "Sarah starts at the bakery" in body["context"]
    assert body["elapsed_ms"] < 1500


def test_llm_plan_served_over_http(llm_client, scripted_openai):
    scripted_openai.script(
        ToolCalls([("run", {"command": "grep -rn bakery sessions memories; git log -3 --stat"})]),
        JSONReply(PLAN),
    )
    response = _post(llm_client)
    body = response.get_json()
    assert response.status_code == 200, body
    assert body["engine"] == "llm" and "fallback_reason" not in body
    assert [b["source"] for b in body["blocks"]] == [
        "profile.md#L1-L12",
        "sessions/2024/05/s1.md#L6-L9",
    ]
    assert "Sarah starts at the bakery on Monday" in body["context"]
    meta = body["metadata"]
    assert (meta["turns"], meta["commands"], meta["refused"]) == (2, 3, 0)
    assert meta["llm_tokens_in"] > 0 and meta["llm_tokens_out"] > 0
    assert {"hydrate_ms", "agent_ms", "agent_llm_ms", "resolve_ms"} <= set(meta["timings_ms"])


def test_cli_run_prints_what_the_agent_sees(store):
    runner = CliRunner()
    shown = runner.invoke(cli_app, ["run", "ana", "grep -n bakery sessions/2024/05/s1.md"])
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith("exit 0\n<<<DATA-")
    assert "8:- **Ana** (user): My sister Sarah starts at the bakery" in shown.output

    refused = runner.invoke(cli_app, ["run", "ana", "cat ../../etc/passwd"])
    assert refused.exit_code == 126
    assert refused.output.startswith("refused: nothing ran")
    assert "outside the repository" in refused.output

    missing = runner.invoke(cli_app, ["run", "nobody", "cat index.md"])
    assert missing.exit_code == 2
