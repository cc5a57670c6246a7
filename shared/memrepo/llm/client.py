"""A :class:`~memrepo.llm.base.ChatModel` on any OpenAI-compatible endpoint (``openai`` SDK).

Policy lives here, I/O in the SDK (built with ``max_retries=0``, so this module is the only place
that retries):

* **timeouts**: each HTTP request gets ``min(timeout_s, time left before the deadline)`` as a
  wall-clock bound on the whole request, a trickling answer included (:mod:`memrepo.llm.deadline`);
* **retries**: connection errors, timeouts, 408, 409, 429 and 5xx are retried at most
  ``max_retries`` times with full-jitter exponential backoff (``backoff_s * 2**n``, at most
  ``max_backoff_s``; a ``Retry-After`` header wins, capped the same), never past the deadline;
  other 4xx are not retried;
* **structured output**: with a ``response_model`` the JSON Schema is added to the system
  message, ``response_format`` asks for JSON (``json_mode``), the answer is validated with
  pydantic, and an invalid answer is sent back with the validation errors at most ``max_repairs``
  times;
* **usage**: every request is recorded (:class:`~memrepo.llm.base.CallRecord`) in the call's
  :class:`~memrepo.llm.base.Budget` and logged with its tokens and latency;
* **errors**: ``openai`` exceptions become :mod:`memrepo.errors` (see :func:`translate_error`),
  chained ``from`` the original.

``openai`` is imported when a client is built, never when this module is imported.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal

import tenacity
from pydantic import BaseModel, ValidationError

from memrepo.errors import LLMBadOutput, LLMError, LLMRejected, LLMUnavailable
from memrepo.llm.base import Budget, CallRecord, ChatResult, M, ToolCall, Usage
from memrepo.llm.deadline import bounded, deadline_http_client

if TYPE_CHECKING:
    import openai

    from memrepo.settings import Settings

log = logging.getLogger(__name__)

JsonMode = Literal["json_object", "json_schema", "off"]

#: HTTP statuses worth retrying besides 5xx (the same set the SDK retries by default).
RETRY_STATUSES = frozenset({408, 409, 429})
#: At most this many characters of an invalid answer are echoed back in a repair round.
MAX_ECHO_CHARS = 12_000

_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n(?P<body>.*?)\n?\s*```\s*$", re.DOTALL)


def translate_error(exc: BaseException, model: str = "") -> LLMError:
    """Map an ``openai`` exception onto the memrepo error tree.

    | ``openai`` exception                               | memrepo error       |
    |----------------------------------------------------|---------------------|
    | ``APITimeoutError``, ``APIConnectionError``        | ``LLMUnavailable``  |
    | ``APIStatusError`` 408, 409, 429, 5xx              | ``LLMUnavailable``  |
    | ``APIStatusError`` other 4xx (401, 403, 404, 400)  | ``LLMRejected``     |
    | ``APIResponseValidationError``                     | ``LLMBadOutput``    |
    | ``LengthFinishReasonError``, ``ContentFilter...``  | ``LLMBadOutput``    |
    | any other ``OpenAIError`` (client misconfigured)   | ``LLMRejected``     |
    | anything else                                      | ``LLMUnavailable``  |

    Args:
        exc: the exception raised by the SDK.
        model: the model requested, for the message.

    Returns:
        The memrepo error to raise ``from exc``.
    """
    import openai

    who = f"LLM {model}" if model else "LLM"
    if isinstance(exc, openai.APITimeoutError):
        return LLMUnavailable(f"{who}: request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return LLMUnavailable(f"{who}: cannot reach the endpoint ({exc})")
    if isinstance(exc, openai.APIResponseValidationError):
        return LLMBadOutput(f"{who}: the response does not have the chat-completion shape ({exc})")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        detail = str(getattr(exc, "message", exc))[:300]
        if status in RETRY_STATUSES or status >= 500:
            return LLMUnavailable(f"{who}: HTTP {status} after retries: {detail}")
        return LLMRejected(f"{who}: HTTP {status}, request refused: {detail}")
    if isinstance(exc, openai.LengthFinishReasonError | openai.ContentFilterFinishReasonError):
        return LLMBadOutput(f"{who}: {exc}")
    if isinstance(exc, openai.OpenAIError):
        return LLMRejected(f"{who}: client error: {exc}")
    return LLMUnavailable(f"{who}: {type(exc).__name__}: {exc}")


def _retryable(exc: BaseException) -> bool:
    """Whether a failed request may succeed when sent again."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # timeouts included
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
    return False


def _outcome(exc: BaseException) -> str:
    status = getattr(exc, "status_code", None)
    return f"http {status}" if isinstance(status, int) else type(exc).__name__


def _retry_after(exc: BaseException | None) -> float | None:
    """Return the server's ``Retry-After`` hint in seconds, if the error carries one."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw is None:
            continue
        try:
            value = float(raw) * scale
        except ValueError:
            continue  # an HTTP date: fall back to our own backoff
        if value >= 0:
            return value
    return None


def json_text(content: str) -> str:
    """Return the JSON part of an answer: without a Markdown fence or prose around the object.

    Args:
        content: the assistant text.

    Returns:
        The text to parse; unchanged when no fence or surrounding prose is found.
    """
    text = content.strip()
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group("body").strip()
    if not text.startswith(("{", "[")):
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end:
            text = text[start : end + 1]
    return text


def describe_validation_error(exc: ValidationError, limit: int = 10) -> str:
    """Return a short, model-readable list of what failed (``loc: message``; at most ``limit``)."""
    problems = []
    for err in exc.errors()[:limit]:
        where = ".".join(str(p) for p in err["loc"]) or "answer"
        problems.append(f"{where}: {err['msg']}")
    more = exc.error_count() - limit
    return "; ".join(problems) + (f"; and {more} more" if more > 0 else "")


def _estimate_tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None
) -> int:
    """Estimate the prompt tokens of a request (``cl100k_base`` count plus 4 per message)."""
    from memrepo import tokens

    text = "\n".join(str(m.get("content") or "") for m in messages)
    extra = json.dumps(list(tools)) if tools else ""
    return tokens.count(text + extra) + 4 * len(messages)


class _StopAtDeadline(tenacity.stop.stop_base):
    """Stop retrying when the next backoff would end past the deadline."""

    def __init__(self, deadline: float | None, clock: Callable[[], float]) -> None:
        self.deadline = deadline
        self.clock = clock

    def __call__(self, retry_state: tenacity.RetryCallState) -> bool:
        if self.deadline is None:
            return False
        return self.clock() + (retry_state.upcoming_sleep or 0.0) >= self.deadline


class OpenAIChat:
    """A chat model on an OpenAI-compatible endpoint (see the module docstring)."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
        max_repairs: int = 2,
        json_mode: JsonMode = "json_object",
        temperature: float | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Build the SDK client (imports ``openai``).

        Args:
            base_url: the endpoint, e.g. ``https://openrouter.ai/api/v1`` or
                ``http://127.0.0.1:8080/v1`` (llama.cpp server, vLLM).
            model: the model name sent with every request.
            api_key: the bearer key; ``None`` sends a placeholder (local servers need none).
            timeout_s: seconds per HTTP request, in total (connect, send, wait, read).
            max_retries: retries per request after a retryable failure (0 = one attempt).
            backoff_s: first backoff ceiling in seconds, doubled per retry (full jitter).
            max_backoff_s: ceiling of any backoff or ``Retry-After`` wait, in seconds.
            max_repairs: extra rounds for an answer that fails its ``response_model``.
            json_mode: ``json_object`` sends ``response_format={"type": "json_object"}``,
                ``json_schema`` sends the model's JSON Schema (non-strict), ``off`` sends nothing
                (for servers that reject ``response_format``); the schema is in the prompt in
                every mode.
            temperature: the sampling temperature sent with every request (0 for reproducible
                evaluations); ``None`` sends none, so the endpoint's default applies.
            sleep: the sleep function used between retries (tests pass a recorder).
            clock: the monotonic clock deadlines are measured on.
        """
        import openai

        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.max_repairs = max_repairs
        self.json_mode: JsonMode = json_mode
        self.temperature = temperature
        self._sleep = sleep
        self._clock = clock
        self._sdk: openai.OpenAI = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or "unused",
            timeout=timeout_s,
            max_retries=0,
            http_client=deadline_http_client(),
        )

    @classmethod
    def from_settings(
        cls, settings: Settings, role: Literal["writer", "retrieval"], **kwargs: Any
    ) -> OpenAIChat:
        """Return the client of ``role`` configured from ``settings``.

        Args:
            settings: base URL, API key, model per role, timeout, retries, JSON mode.
            role: ``writer`` uses ``writer_model``, ``retrieval`` uses ``retrieval_model``.
            **kwargs: overrides of the constructor's other arguments.
        """
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        options: dict[str, Any] = {
            "base_url": settings.llm_base_url,
            "model": settings.writer_model if role == "writer" else settings.retrieval_model,
            "api_key": key,
            "timeout_s": settings.llm_timeout_s,
            "max_retries": settings.llm_max_retries,
            "json_mode": settings.llm_json_mode,
        }
        options.update(kwargs)
        return cls(**options)

    def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        self._sdk.close()

    # -- the port ------------------------------------------------------------------------------

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
        """Send ``messages`` and return the (validated) answer; see :meth:`ChatModel.chat`.

        Raises:
            LLMUnavailable: connection errors, timeouts, 408/409/429/5xx after the retries, or
                the deadline passed.
            LLMRejected: any other 4xx.
            LLMBadOutput: no choice, a refusal, or an answer still invalid after
                ``max_repairs`` repair rounds.
            LLMBudgetExceeded: ``budget`` refuses another request.
        """
        budget = budget if budget is not None else Budget()
        first_record = len(budget.records)
        history = self._with_schema(messages, response_model)
        problem = ""
        for round_no in range(self.max_repairs + 1):
            completion = self._complete(
                history, tools, response_model, max_tokens, deadline, budget
            )
            if not completion.choices:
                raise LLMBadOutput(f"LLM {self.model}: the answer has no choices")
            choice = completion.choices[0]
            msg = choice.message
            calls = tuple(
                ToolCall(tc.id, tc.function.name, tc.function.arguments or "")
                for tc in (msg.tool_calls or [])
                if getattr(tc, "function", None) is not None
            )
            message: dict[str, Any] = {"role": "assistant", "content": msg.content}
            if calls:
                message["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments},
                    }
                    for c in calls
                ]
            parsed: M | None = None
            if response_model is not None and not calls:
                if getattr(msg, "refusal", None):
                    raise LLMBadOutput(f"LLM {self.model} refused: {str(msg.refusal)[:300]}")
                content = msg.content or ""
                if choice.finish_reason == "length":
                    problem = "the answer was cut off at the token limit; answer more briefly"
                else:
                    try:
                        parsed = response_model.model_validate_json(json_text(content))
                    except ValidationError as exc:
                        problem = describe_validation_error(exc)
                if parsed is None:
                    self._mark_invalid(budget)
                    log.info(
                        "llm answer invalid; asking again",
                        extra={
                            "model": self.model,
                            "round": round_no + 1,
                            "problem": problem[:300],
                        },
                    )
                    history = [
                        *history,
                        {"role": "assistant", "content": content[:MAX_ECHO_CHARS]},
                        {
                            "role": "user",
                            "content": (
                                f"That answer is not valid: {problem}. Answer again with only one "
                                "JSON object that matches the schema, and nothing else."
                            ),
                        },
                    ]
                    continue
            records = tuple(budget.records[first_record:])
            return ChatResult(
                content=msg.content,
                parsed=parsed,
                tool_calls=calls,
                finish_reason=choice.finish_reason,
                model=completion.model or self.model,
                usage=sum(
                    (Usage(r.prompt_tokens, r.completion_tokens, 1) for r in records), Usage()
                ),
                records=records,
                message=message,
            )
        raise LLMBadOutput(
            f"LLM {self.model}: answer still invalid after {self.max_repairs + 1} attempts: "
            f"{problem[:500]}"
        )

    # -- internals -----------------------------------------------------------------------------

    def _with_schema(
        self, messages: Sequence[Mapping[str, Any]], response_model: type[BaseModel] | None
    ) -> list[dict[str, Any]]:
        """Return a copy of ``messages`` whose system message states the JSON Schema to follow."""
        history = [dict(m) for m in messages]
        if response_model is None:
            return history
        schema = json.dumps(response_model.model_json_schema(), separators=(",", ":"))
        rule = (
            "Answer with one JSON object, and nothing else, that matches this JSON Schema:\n"
            + schema
        )
        if history and history[0].get("role") == "system":
            history[0]["content"] = f"{history[0].get('content') or ''}\n\n{rule}"
        else:
            history.insert(0, {"role": "system", "content": rule})
        return history

    def _response_format(self, response_model: type[BaseModel]) -> dict[str, Any] | None:
        if self.json_mode == "json_object":
            return {"type": "json_object"}
        if self.json_mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {
                    "name": response_model.__name__[:64],
                    "schema": response_model.model_json_schema(),
                    "strict": False,
                },
            }
        return None

    @staticmethod
    def _mark_invalid(budget: Budget) -> None:
        if budget.records:
            budget.records[-1] = dataclasses.replace(budget.records[-1], outcome="invalid")

    def _wait(self, retry_state: tenacity.RetryCallState) -> float:
        """Backoff before retry ``n``: the server's ``Retry-After``, else full jitter."""
        outcome = retry_state.outcome
        hinted = _retry_after(outcome.exception() if outcome is not None else None)
        if hinted is not None:
            return min(hinted, self.max_backoff_s)
        ceiling = min(self.max_backoff_s, self.backoff_s * 2 ** (retry_state.attempt_number - 1))
        return random.uniform(0, ceiling)  # noqa: S311 - jitter, not security

    def _complete(
        self,
        history: list[dict[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None,
        response_model: type[BaseModel] | None,
        max_tokens: int,
        deadline: float | None,
        budget: Budget,
    ) -> Any:
        """Send one request, retrying per policy; return the SDK's ``ChatCompletion``."""
        import openai

        options: dict[str, Any] = {}
        if self.temperature is not None:
            options["temperature"] = self.temperature
        if tools:
            options["tools"] = list(tools)
        elif response_model is not None:
            response_format = self._response_format(response_model)
            if response_format is not None:
                options["response_format"] = response_format
        estimate = _estimate_tokens(history, tools)

        def attempt() -> Any:
            timeout = self.timeout_s
            if deadline is not None:
                left = deadline - self._clock()
                if left <= 0:
                    raise LLMUnavailable(f"LLM {self.model}: deadline passed before the request")
                timeout = min(timeout, left)
            allowed = budget.reserve(estimate, max_tokens)
            started = time.monotonic()
            try:
                with bounded(timeout):  # in total, not only between bytes (llm/deadline.py)
                    completion = self._sdk.chat.completions.create(
                        model=self.model,
                        messages=history,  # type: ignore[arg-type]
                        max_tokens=allowed,
                        timeout=timeout,
                        **options,
                    )
            except openai.OpenAIError as exc:
                record = CallRecord(
                    self.model, 0, 0, (time.monotonic() - started) * 1000, _outcome(exc)
                )
                budget.record(record)
                log.info(
                    "llm call failed", extra={**dataclasses.asdict(record), "error": str(exc)[:200]}
                )
                raise
            usage = completion.usage
            record = CallRecord(
                completion.model or self.model,
                usage.prompt_tokens if usage else estimate,
                usage.completion_tokens if usage else 0,
                (time.monotonic() - started) * 1000,
                "ok",
            )
            budget.record(record)
            log.info("llm call", extra=dataclasses.asdict(record))
            return completion

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception(_retryable),
            stop=tenacity.stop_after_attempt(self.max_retries + 1)
            | _StopAtDeadline(deadline, self._clock),
            wait=self._wait,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except openai.OpenAIError as exc:
            raise translate_error(exc, self.model) from exc
