#!/usr/bin/env python3
"""Measure the retrieval agent with and without prefetching the manifest and the temporal probe.

Writes one LoCoMo conversation (deterministic writer, in memory), then answers the same question
with a scripted OpenAI-compatible server whose every answer takes ``--latency`` seconds, once
with ``prefetch=True`` (code runs ``cat index.md`` and the probe before the first LLM call) and
once with ``prefetch=False`` (the model asks for them in its first turn). Prints, per mode, the
LLM calls, prompt tokens sent (``cl100k_base`` count of every request's messages), the time spent
in sandbox commands and the wall time of the agent.

Example::

    .venv/bin/python scripts/bench_agent_prefetch.py --latency 0.8 --repeat 3
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Annotated

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fakes import InMemoryStore  # noqa: E402
from helpers import LOCOMO  # noqa: E402
from memrepo import locomo, tokens  # noqa: E402
from memrepo.llm.client import OpenAIChat  # noqa: E402
from memrepo.repos import UserRepos  # noqa: E402
from memrepo.retrieval.agent import RetrievalAgent  # noqa: E402
from memrepo.retrieval.agent_prompt import MANIFEST_COMMAND, PROBE_COMMAND  # noqa: E402
from memrepo.writer import DeterministicWriter, SessionWriter  # noqa: E402
from scripted_openai import JSONReply, ScriptedOpenAI, Slow, ToolCalls  # noqa: E402

QUESTION = [{"role": "user", "content": "How is Caroline doing with the adoption plans?"}]
INVESTIGATE = (
    "grep -n -i 'adopt' memories/people/*.md timeline/*.md | head -20; "
    "head -30 memories/people/caroline.md; git log --stat -5 -- memories/people/caroline.md"
)
PLAN = {
    "pointers": [
        {
            "kind": "file",
            "path": "memories/people/caroline.md",
            "reason": "Caroline",
            "priority": "must",
        }
    ]
}


def main(
    latency: Annotated[float, typer.Option(help="seconds each scripted LLM answer takes")] = 0.8,
    repeat: Annotated[int, typer.Option(help="runs per mode")] = 3,
) -> None:
    """Print the figures of both modes (see the module docstring)."""
    repos = UserRepos(InMemoryStore())
    writer = SessionWriter(repos, DeterministicWriter())
    conversation = locomo.conversation(locomo.load(LOCOMO)[0], "bench")
    for session in conversation.events:
        writer.write(session)
    tokens.count("warm up")
    ws, _ = repos.checkout("bench")
    with ws, ScriptedOpenAI() as srv:
        chat = OpenAIChat(base_url=srv.base_url, model="bench", api_key="k", max_retries=0)
        for prefetch in (True, False):
            walls, calls, sent, command_ms = [], [], [], []
            for _ in range(repeat):
                first = [] if prefetch else [f"{MANIFEST_COMMAND}; {PROBE_COMMAND}"]
                script = [ToolCalls([("run", {"command": c})]) for c in [*first, INVESTIGATE]]
                srv.script(*(Slow(latency, r) for r in [*script, JSONReply(PLAN)]))
                before = srv.calls
                agent = RetrievalAgent(chat, prefetch=prefetch)
                started = time.monotonic()
                _, meta = agent.plan(ws, QUESTION, 2_000, time.monotonic() + 60)
                walls.append(time.monotonic() - started)
                requests = srv.requests[before:]
                calls.append(len(requests))
                sent.append(
                    sum(
                        tokens.count(str(m.get("content") or ""))
                        for r in requests
                        for m in r["messages"]
                    )
                )
                timings = meta["timings_ms"]
                command_ms.append(timings["agent_prefetch_ms"] + timings["agent_commands_ms"])
            typer.echo(
                f"prefetch={prefetch!s:5}  LLM calls {statistics.median(calls):.0f}  "
                f"prompt tokens sent {statistics.median(sent):,.0f}  "
                f"commands {statistics.median(command_ms):.0f} ms  "
                f"agent wall {statistics.median(walls):.2f} s"
            )
        chat.close()


if __name__ == "__main__":
    typer.run(main)
