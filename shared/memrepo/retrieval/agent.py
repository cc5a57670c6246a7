"""The LLM retrieval agent: one sandboxed ``run`` tool, a fixed protocol, a typed plan, a deadline.

It implements :class:`memrepo.retrieval.service.PlanningAgent` over any
:class:`memrepo.llm.ChatModel` (the OpenAI-compatible client in production) with OpenAI tool
calling. The protocol is DiffMem's:

1. read the manifest (``cat index.md``);
2. run a temporal probe (``git log --format='%h %ad %s' --date=relative --name-only -15``): what
   changed recently and which files change together;
3. batch the investigation into one ``run`` call of chained commands (``grep -n``, ``head -30``,
   ``git diff HEAD~3.. -- FILE``, ``git log --stat -5 -- FILE``);
4. answer with a plan and stop.

Steps 1 and 2 are run by code before the first LLM call (``prefetch=True``) and their outputs put
in the first message: they cost ~20-40 ms of sandbox time and save one or two LLM round trips
(each hundreds of ms to seconds), so a normal run is two LLM calls: investigate, answer.

**The answer is a final message, not a tool call**: one JSON object matching
:class:`~memrepo.retrieval.plan.Plan`, validated by the chat model (``response_model=Plan``, its
JSON Schema in the system message; fences or prose around the object are tolerated; an invalid
answer gets the model's bounded repair rounds). Stopping is what tool calling already means by a
message without tool calls, and no ``tool_choice`` is needed. The ``run`` tool stays offered on
every turn (some providers refuse a history with tool calls but no tools); the last turn is told
so, and tool calls on it end the run.

Bounds: at most ``max_turns`` LLM calls; the deadline (a ``time.monotonic()`` instant) is checked
before every LLM call and every command, each LLM request times out at
``min(time left, the client's timeout)`` (the client does this) and each command at
``min(command_timeout_s, time left)``; an LLM call needs at least ``min_llm_s`` left.

Failure: any problem raises :class:`AgentFailed` with a ``code`` (``deadline``,
``llm_unavailable``, ``llm_rejected``, ``bad_plan``, ``llm_budget``, ``turn_limit``) and the
metadata gathered so far; the retriever then falls back to the deterministic plan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from memrepo.errors import (
    LLMBadOutput,
    LLMBudgetExceeded,
    LLMError,
    LLMRejected,
    LLMUnavailable,
)
from memrepo.layout import PROFILE
from memrepo.llm.base import Budget, ChatModel, ToolCall
from memrepo.retrieval import agent_prompt
from memrepo.retrieval.deterministic import PROFILE_HEAD_LINES
from memrepo.retrieval.plan import Plan, Pointer
from memrepo.retrieval.run_tool import (
    COMMAND_TIMEOUT_S,
    MAX_OUTPUT_BYTES,
    RUN_TOOL_NAME,
    RunTool,
    new_nonce,
    run_tool_spec,
)
from memrepo.workspace import Workspace

log = logging.getLogger(__name__)

#: Codes of :attr:`AgentFailed.code`, the first word of the response's ``fallback_reason``.
FAILURE_CODES = (
    "deadline",
    "llm_unavailable",
    "llm_rejected",
    "bad_plan",
    "llm_budget",
    "turn_limit",
)


_READS = ("file", "file_section")


class AgentFailed(LLMError):
    """Raised when the agent cannot produce a plan; the retriever falls back to its own.

    Attributes:
        code: one of :data:`FAILURE_CODES`.
        metadata: what the run did before it failed (turns, commands, tokens, timings).
    """

    def __init__(self, code: str, detail: str, metadata: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {detail}")
        self.code = code
        self.detail = detail
        self.metadata = metadata or {}


@dataclass
class _Run:
    """The state of one :meth:`RetrievalAgent.plan` call (the agent itself holds none)."""

    budget: Budget
    prefetch: bool
    turns: int = 0
    commands: int = 0
    refused: int = 0
    timings: dict[str, float] = field(
        default_factory=lambda: {
            "agent_prefetch_ms": 0.0,
            "agent_llm_ms": 0.0,
            "agent_commands_ms": 0.0,
        }
    )

    def metadata(self, model: str) -> dict[str, Any]:
        """Return the run's figures: turns, commands, LLM tokens in/out, ms per phase."""
        return {
            "model": model,
            "turns": self.turns,
            "llm_calls": self.budget.calls,
            "commands": self.commands,
            "refused": self.refused,
            "llm_tokens_in": self.budget.prompt_tokens,
            "llm_tokens_out": self.budget.completion_tokens,
            "prefetch": self.prefetch,
            "timings_ms": {k: round(v, 1) for k, v in self.timings.items()},
        }


def with_profile(plan: Plan, has_profile: bool) -> Plan:
    """Return ``plan`` with the always-loaded profile as its first ``must`` pointer.

    A ``must`` pointer reading ``profile.md`` (``file`` or ``file_section``; a diff or log of it
    does not count) is kept as is; an ``optional`` one is made ``must`` and moved first;
    otherwise its first :data:`PROFILE_HEAD_LINES` lines are added (as the deterministic engine
    does).

    Args:
        plan: the agent's validated plan.
        has_profile: whether the repository has a ``profile.md``.
    """
    if not has_profile:
        return plan
    pointers = list(plan.pointers)
    reads = [i for i, p in enumerate(pointers) if p.path == PROFILE and p.kind in _READS]
    if any(pointers[i].priority == "must" for i in reads):
        return plan
    if reads:
        chosen = pointers.pop(reads[0])
        first = chosen.model_copy(update={"priority": "must"})
    else:
        first = Pointer(
            kind="file_section",
            path=PROFILE,
            start_line=1,
            end_line=PROFILE_HEAD_LINES,
            reason="who the user is (always loaded)",
            priority="must",
        )
    return plan.model_copy(update={"pointers": [first, *pointers]})


def _failure_code(exc: LLMError, deadline: float) -> str:
    if isinstance(exc, LLMUnavailable) and time.monotonic() >= deadline - 0.05:
        return "deadline"
    if isinstance(exc, LLMUnavailable):
        return "llm_unavailable"
    if isinstance(exc, LLMRejected):
        return "llm_rejected"
    if isinstance(exc, LLMBadOutput):
        return "bad_plan"
    if isinstance(exc, LLMBudgetExceeded):
        return "llm_budget"
    return "llm_unavailable"


class RetrievalAgent:
    """The LLM planning engine (see the module docstring); safe to share between threads.

    Args:
        model: the chat model (``OpenAIChat.from_settings(settings, "retrieval")``).
        max_turns: LLM calls at most per request (each reply of the model is one turn).
        prefetch: run the manifest and the temporal probe before the first LLM call.
        command_timeout_s: wall-clock limit of one command, in seconds.
        max_output_bytes: output kept from one command, in bytes.
        max_commands_per_turn: ``run`` calls executed per turn; more are answered "not run".
        min_llm_s: an LLM call is not started with less time than this left, in seconds.
        completion_tokens: completion tokens allowed per LLM request.
        max_llm_tokens: prompt plus completion tokens allowed per request, ``None`` for no cap.
    """

    name = "llm"

    def __init__(
        self,
        model: ChatModel,
        *,
        max_turns: int = 4,
        prefetch: bool = True,
        command_timeout_s: float = COMMAND_TIMEOUT_S,
        max_output_bytes: int = MAX_OUTPUT_BYTES,
        max_commands_per_turn: int = 4,
        min_llm_s: float = 0.2,
        completion_tokens: int = 2_000,
        max_llm_tokens: int | None = 60_000,
    ) -> None:
        if max_turns < 1:
            raise ValueError("max_turns must be at least 1")
        self.model = model
        self.max_turns = max_turns
        self.prefetch = prefetch
        self.command_timeout_s = command_timeout_s
        self.max_output_bytes = max_output_bytes
        self.max_commands_per_turn = max_commands_per_turn
        self.min_llm_s = min_llm_s
        self.completion_tokens = completion_tokens
        self.max_llm_tokens = max_llm_tokens

    def plan(
        self,
        ws: Workspace,
        conversation: Sequence[dict[str, str]],
        max_tokens: int,
        deadline: float,
    ) -> tuple[Plan, dict[str, Any]]:
        """Explore ``ws`` with the model and return its plan and the run's metadata.

        Args:
            ws: the hydrated repository, a private copy (only read, through the sandbox).
            conversation: ``[{role, content}]``, oldest first.
            max_tokens: the context budget the plan will be resolved under, in tokens.
            deadline: a ``time.monotonic()`` instant by which the plan must be returned.

        Returns:
            ``(plan, metadata)``: a validated plan whose first pointer is the profile (``must``)
            when the repository has one; metadata as in :meth:`_Run.metadata`.

        Raises:
            AgentFailed: the deadline, an LLM error, an invalid plan or the turn limit; its
                ``metadata`` says what was done.
        """
        run = _Run(
            budget=Budget(max_calls=self.max_turns * 4, max_tokens=self.max_llm_tokens),
            prefetch=self.prefetch,
        )
        tool = RunTool(
            ws.path,
            timeout_s=self.command_timeout_s,
            max_output_bytes=self.max_output_bytes,
            nonce=new_nonce(),
        )
        try:
            plan = self._explore(tool, conversation, max_tokens, deadline, run)
        except AgentFailed as exc:
            exc.metadata = run.metadata(self.model.model)
            raise
        except TimeoutError as exc:
            raise AgentFailed("deadline", str(exc), run.metadata(self.model.model)) from exc
        except LLMError as exc:
            code = _failure_code(exc, deadline)
            raise AgentFailed(code, str(exc), run.metadata(self.model.model)) from exc
        plan = with_profile(plan, (ws.path / PROFILE).is_file())
        meta = run.metadata(self.model.model)
        log.info("retrieval agent planned", extra={**meta, "pointers": len(plan.pointers)})
        return plan, meta

    # -- the loop ------------------------------------------------------------------------------

    def _explore(
        self,
        tool: RunTool,
        conversation: Sequence[dict[str, str]],
        max_tokens: int,
        deadline: float,
        run: _Run,
    ) -> Plan:
        prefetched: list[tuple[str, str]] = []
        if self.prefetch:
            for command in (agent_prompt.MANIFEST_COMMAND, agent_prompt.PROBE_COMMAND):
                text = self._run_command(tool, command, deadline, run, "agent_prefetch_ms")
                prefetched.append((command, text))
        system = agent_prompt.system_prompt(
            max_tokens=max_tokens,
            max_turns=self.max_turns,
            nonce=tool.nonce,
            prefetched=self.prefetch,
        )
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {
                "role": "user",
                "content": agent_prompt.first_message(
                    conversation, nonce=tool.nonce, prefetched=prefetched
                ),
            },
        ]
        tools = [run_tool_spec()]
        for turn in range(1, self.max_turns + 1):
            last = turn == self.max_turns
            if last and turn > 1:
                messages.append({"role": "user", "content": agent_prompt.LAST_TURN})
            left = deadline - time.monotonic()
            if left < self.min_llm_s:
                raise AgentFailed(
                    "deadline",
                    f"{max(left, 0) * 1000:.0f} ms left before turn {turn}: "
                    "no time for another LLM call",
                )
            started = time.monotonic()
            try:
                result = self.model.chat(
                    messages,
                    tools=tools,
                    response_model=Plan,
                    max_tokens=self.completion_tokens,
                    deadline=deadline,
                    budget=run.budget,
                )
            finally:
                run.turns += 1
                run.timings["agent_llm_ms"] += (time.monotonic() - started) * 1000
            if not result.tool_calls:
                if result.parsed is None:  # a ChatModel that skipped validation
                    raise AgentFailed("bad_plan", "the final answer is not a plan")
                return result.parsed
            if last:
                raise AgentFailed(
                    "turn_limit",
                    f"no plan after {self.max_turns} turns: the model still "
                    f"called {len(result.tool_calls)} tool(s)",
                )
            messages.append(result.message)
            for index, call in enumerate(result.tool_calls):
                content = self._answer_call(tool, call, index, deadline, run)
                messages.append({"role": "tool", "tool_call_id": call.id, "content": content})
        raise AgentFailed("turn_limit", f"no plan after {self.max_turns} turns")  # unreachable

    def _answer_call(
        self, tool: RunTool, call: ToolCall, index: int, deadline: float, run: _Run
    ) -> str:
        """Return the ``tool`` message content for one tool call (running it when valid)."""
        if call.name != RUN_TOOL_NAME:
            return (
                f"error: there is no tool `{call.name[:40]}`; the only tool is "
                "run(command). To answer, reply with the plan JSON without a tool call."
            )
        if index >= self.max_commands_per_turn:
            return (
                f"not run: at most {self.max_commands_per_turn} run calls per turn; "
                "chain commands with `;` in one call"
            )
        try:
            args: Mapping[str, Any] = call.args()
        except LLMBadOutput as exc:
            return f'error: {exc}; send {{"command": "..."}}'
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            return 'error: the arguments must be {"command": "<command string>"}'
        return self._run_command(tool, command, deadline, run, "agent_commands_ms")

    def _run_command(
        self, tool: RunTool, command: str, deadline: float, run: _Run, phase: str
    ) -> str:
        """Run one command, count it under ``phase``, and return what the model reads."""
        started = time.monotonic()
        try:
            done = tool.run(command, deadline=deadline)
        finally:
            run.timings[phase] += (time.monotonic() - started) * 1000
        run.commands += 1
        run.refused += done.result.refused
        log.debug(
            "agent command",
            extra={
                "command": command[:300],
                "exit_code": done.result.exit_code,
                "refused": done.result.refused,
                "elapsed_s": round(done.result.elapsed_s, 3),
            },
        )
        return done.text
