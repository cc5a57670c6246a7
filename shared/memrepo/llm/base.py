"""The LLM port: what an engine asks of a chat model, and what it gets back.

Engines (the LLM writer, the retrieval agent) depend on :class:`ChatModel` only; the
OpenAI-compatible implementation lives in :mod:`memrepo.llm.client`, and importing this module
loads no SDK. One call::

    result = model.chat(
        [{"role": "system", "content": "..."}, {"role": "user", "content": "..."}],
        response_model=Answer,          # a pydantic model: the reply is validated into it
        max_tokens=2_000,               # completion tokens per request
        deadline=time.monotonic() + 30, # a time.monotonic() instant
        budget=budget,                  # caps shared by every call of one session
    )
    result.parsed        # an Answer instance
    result.usage         # Usage(prompt_tokens, completion_tokens, calls) of this chat() call
    result.records       # one CallRecord per HTTP request sent (retries and repairs included)

With ``tools`` the model may answer with :attr:`ChatResult.tool_calls` instead of text; append
:attr:`ChatResult.message` and one ``{"role": "tool", "tool_call_id", "content"}`` message per call
to the history and call again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from memrepo.errors import LLMBadOutput, LLMBudgetExceeded

M = TypeVar("M", bound=BaseModel)

#: Tokens a request must be able to spend on its answer; below this the budget refuses the call.
MIN_COMPLETION_TOKENS = 64


@dataclass(frozen=True)
class Usage:
    """Tokens and requests spent, summed over one or more HTTP requests."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.calls + other.calls,
        )


@dataclass(frozen=True)
class CallRecord:
    """One HTTP request to the endpoint, successful or not.

    Attributes:
        model: the model requested.
        prompt_tokens: tokens of the request as reported by the endpoint (0 when it failed).
        completion_tokens: tokens of the answer as reported (0 when it failed).
        latency_ms: wall time of the request in milliseconds.
        outcome: ``ok``, ``invalid`` (answer failed validation), ``http <status>`` or the
            exception class name (``APITimeoutError``, ``APIConnectionError``).
    """

    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    outcome: str


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the raw JSON text the model wrote."""

    id: str
    name: str
    arguments: str

    def args(self) -> dict[str, Any]:
        """Return the arguments decoded.

        Raises:
            LLMBadOutput: the arguments are not a JSON object.
        """
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError as exc:
            raise LLMBadOutput(
                f"tool call {self.name!r} has arguments that are not JSON: {exc}"
            ) from exc
        if not isinstance(value, dict):
            raise LLMBadOutput(
                f"tool call {self.name!r} arguments are {type(value).__name__}, not an object"
            )
        return value


@dataclass(frozen=True)
class ChatResult(Generic[M]):
    """The answer of one :meth:`ChatModel.chat` call.

    Attributes:
        content: the assistant text (``None`` when it only called tools).
        parsed: the validated ``response_model`` instance, or ``None`` without a response model
            or when the model answered with tool calls.
        tool_calls: the tool calls asked for, in order.
        finish_reason: ``stop``, ``length``, ``tool_calls``, ... of the final request.
        model: the model that answered (as reported by the endpoint).
        usage: tokens and requests of this call, repairs and retries included.
        records: one :class:`CallRecord` per HTTP request of this call.
        message: the assistant message as a dict, ready to append to the conversation.
    """

    content: str | None
    parsed: M | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str | None
    model: str
    usage: Usage
    records: tuple[CallRecord, ...]
    message: dict[str, Any] = field(default_factory=dict)


class Budget:
    """Caps on requests and tokens shared by every call of one unit of work (one session).

    Not thread-safe: one budget per session or request. The token cap is enforced before each
    request from an estimate of its prompt: the request's ``max_tokens`` is lowered to what is
    left, and a request that cannot get :data:`MIN_COMPLETION_TOKENS` is refused, so the total
    stays within the cap up to the error of the prompt estimate.
    """

    def __init__(self, *, max_calls: int | None = None, max_tokens: int | None = None) -> None:
        """Args:
        max_calls: HTTP requests allowed (retries and repair rounds count), ``None`` for no cap.
        max_tokens: prompt plus completion tokens allowed, ``None`` for no cap.
        """
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.records: list[CallRecord] = []

    @property
    def used_tokens(self) -> int:
        """Prompt plus completion tokens recorded so far."""
        return self.prompt_tokens + self.completion_tokens

    def usage(self) -> Usage:
        """Return what was spent so far."""
        return Usage(self.prompt_tokens, self.completion_tokens, self.calls)

    def reserve(self, prompt_estimate: int, max_tokens: int) -> int:
        """Count one request about to be sent; return the ``max_tokens`` it may use.

        Args:
            prompt_estimate: estimated prompt tokens of the request.
            max_tokens: the completion tokens the caller asked for.

        Raises:
            LLMBudgetExceeded: the call cap is reached, or fewer than
                :data:`MIN_COMPLETION_TOKENS` tokens would be left for the answer.
        """
        if self.max_calls is not None and self.calls >= self.max_calls:
            raise LLMBudgetExceeded(
                f"LLM call budget spent: {self.calls} of {self.max_calls} calls"
            )
        allowed = max_tokens
        if self.max_tokens is not None:
            left = self.max_tokens - self.used_tokens - prompt_estimate
            if left < MIN_COMPLETION_TOKENS:
                raise LLMBudgetExceeded(
                    f"LLM token budget spent: {self.used_tokens} of {self.max_tokens} tokens used, "
                    f"next prompt ~{prompt_estimate} tokens"
                )
            allowed = min(max_tokens, left)
        self.calls += 1
        return allowed

    def record(self, record: CallRecord) -> None:
        """Add the tokens of a finished request."""
        self.records.append(record)
        self.prompt_tokens += record.prompt_tokens
        self.completion_tokens += record.completion_tokens


class ChatModel(Protocol):
    """Port: one chat model behind an OpenAI-compatible endpoint (see the module docstring)."""

    model: str

    def chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_model: type[M] | None = None,
        max_tokens: int = 1_024,
        deadline: float | None = None,
        budget: Budget | None = None,
    ) -> ChatResult[M]:
        """Send ``messages`` and return the answer.

        Args:
            messages: OpenAI chat messages (``{"role", "content"}`` and tool messages).
            tools: OpenAI function-tool definitions, or ``None``.
            response_model: validate the answer's JSON into this pydantic model; an invalid
                answer is sent back with the validation error, a bounded number of times.
            max_tokens: completion tokens allowed per request.
            deadline: a ``time.monotonic()`` instant no request may run past.
            budget: caps shared with other calls of the same session.

        Raises:
            LLMUnavailable: connection errors, timeouts, 429 or 5xx after the bounded retries,
                or the deadline passed.
            LLMRejected: a 4xx other than 408/409/429.
            LLMBadOutput: the answer stayed invalid after the repair rounds.
            LLMBudgetExceeded: the budget refuses another request.
        """
        ...
