"""The OpenAI-compatible client through the real ``openai`` SDK against the scripted server."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx2
import openai
import pytest
from memrepo.errors import LLMBadOutput, LLMBudgetExceeded, LLMError, LLMRejected, LLMUnavailable
from memrepo.llm.base import Budget, ToolCall
from memrepo.llm.client import OpenAIChat, json_text, translate_error
from memrepo.settings import Settings
from pydantic import BaseModel, Field
from scripted_openai import (
    JSONReply,
    Malformed,
    Reply,
    ScriptedOpenAI,
    Slow,
    Status,
    ToolCalls,
    Trickle,
)


class Answer(BaseModel):
    name: str
    age: int = Field(ge=0)


MESSAGES = [
    {"role": "system", "content": "You extract people."},
    {"role": "user", "content": "Ana, 31"},
]


def make(srv: ScriptedOpenAI, sleeps: list[float] | None = None, **kw) -> OpenAIChat:
    options = {
        "base_url": srv.base_url,
        "model": "m-test",
        "api_key": "k",
        "timeout_s": 5.0,
        "sleep": (sleeps.append if sleeps is not None else lambda s: None),
    }
    options.update(kw)
    return OpenAIChat(**options)


def test_structured_answer_and_usage(scripted_openai):
    scripted_openai.script(JSONReply({"name": "Ana", "age": 31}, usage=(120, 9)))
    result = make(scripted_openai).chat(MESSAGES, response_model=Answer, max_tokens=200)
    assert result.parsed == Answer(name="Ana", age=31)
    assert (result.usage.prompt_tokens, result.usage.completion_tokens, result.usage.calls) == (
        120,
        9,
        1,
    )
    assert [r.outcome for r in result.records] == ["ok"]
    request = scripted_openai.last_request
    assert request["model"] == "m-test" and request["max_tokens"] == 200
    assert request["response_format"] == {"type": "json_object"}
    assert "temperature" not in request  # the endpoint's default unless one is set
    assert request["messages"][0]["content"].startswith("You extract people.")
    assert '"age"' in request["messages"][0]["content"]  # the JSON Schema is in the system message
    assert len(request["messages"]) == 2  # no extra system message
    assert scripted_openai.request_headers[-1]["authorization"] == "Bearer k"


@pytest.mark.parametrize(
    ("mode", "expected"),
    [("json_schema", "json_schema"), ("off", None)],
)
def test_json_modes(scripted_openai, mode, expected):
    scripted_openai.script(JSONReply({"name": "Ana", "age": 1}))
    make(scripted_openai, json_mode=mode).chat(MESSAGES, response_model=Answer)
    sent = scripted_openai.last_request.get("response_format")
    assert (sent or {}).get("type") == expected
    if expected == "json_schema":
        assert sent["json_schema"]["schema"]["properties"]["age"]["type"] == "integer"


def test_temperature_is_sent_when_set(scripted_openai):
    scripted_openai.script("a")
    assert make(scripted_openai, temperature=0.0).chat(MESSAGES).content == "a"
    assert scripted_openai.last_request["temperature"] == 0


def test_fenced_or_wrapped_json_is_accepted(scripted_openai):
    scripted_openai.script(
        Reply('```json\n{"name": "Ana", "age": 3}\n```'),
        Reply('Sure! {"name": "Bo", "age": 4} Hope it helps.'),
    )
    chat = make(scripted_openai)
    assert chat.chat(MESSAGES, response_model=Answer).parsed == Answer(name="Ana", age=3)
    assert chat.chat(MESSAGES, response_model=Answer).parsed == Answer(name="Bo", age=4)
    assert json_text("  [1, 2] ") == "[1, 2]"


def test_malformed_then_valid_is_repaired_with_the_error_fed_back(scripted_openai):
    scripted_openai.script(
        Malformed('{"name": "Ana", "age": '),
        JSONReply({"name": "Ana", "age": -1}),
        JSONReply({"name": "Ana", "age": 31}),
    )
    result = make(scripted_openai).chat(MESSAGES, response_model=Answer)
    assert result.parsed == Answer(name="Ana", age=31)
    assert [r.outcome for r in result.records] == ["invalid", "invalid", "ok"]
    assert result.usage.calls == 3
    second, third = scripted_openai.requests[1]["messages"], scripted_openai.requests[2]["messages"]
    assert second[-2] == {"role": "assistant", "content": '{"name": "Ana", "age": '}
    assert "not valid" in second[-1]["content"] and "JSON" in second[-1]["content"]
    assert "age" in third[-1]["content"] and "greater than or equal to 0" in third[-1]["content"]


def test_always_malformed_is_bounded(scripted_openai):
    scripted_openai.default = Malformed("not json at all")
    with pytest.raises(LLMBadOutput, match="after 3 attempts"):
        make(scripted_openai, max_repairs=2).chat(MESSAGES, response_model=Answer)
    assert scripted_openai.calls == 3


def test_cut_answer_is_asked_again_shorter(scripted_openai):
    scripted_openai.script(
        Reply('{"name": "An', finish_reason="length"), JSONReply({"name": "A", "age": 1})
    )
    result = make(scripted_openai).chat(MESSAGES, response_model=Answer)
    assert result.parsed is not None
    assert "cut off" in scripted_openai.requests[1]["messages"][-1]["content"]


def test_429_then_success_backs_off_once(scripted_openai):
    sleeps: list[float] = []
    scripted_openai.script(Status(429), JSONReply({"name": "Ana", "age": 31}))
    result = make(scripted_openai, sleeps, backoff_s=0.2).chat(MESSAGES, response_model=Answer)
    assert result.parsed is not None
    assert [r.outcome for r in result.records] == ["http 429", "ok"]
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.2


def test_retry_after_header_is_honoured_and_capped(scripted_openai):
    sleeps: list[float] = []
    scripted_openai.script(
        Status(429, headers={"retry-after": "1.5"}),
        Status(503, headers={"retry-after": "999"}),
        "plain text",
    )
    result = make(scripted_openai, sleeps, max_backoff_s=4.0).chat(MESSAGES)
    assert result.content == "plain text" and result.parsed is None
    assert sleeps == [1.5, 4.0]


def test_500_forever_is_bounded_and_translated(scripted_openai):
    sleeps: list[float] = []
    scripted_openai.default = Status(500)
    with pytest.raises(LLMUnavailable, match="HTTP 500") as info:
        make(scripted_openai, sleeps, max_retries=3).chat(MESSAGES, response_model=Answer)
    assert scripted_openai.calls == 4 and len(sleeps) == 3
    assert isinstance(info.value.__cause__, openai.InternalServerError)
    assert not info.value.permanent


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_other_4xx_are_not_retried(scripted_openai, status):
    scripted_openai.default = Status(status)
    with pytest.raises(LLMRejected, match=f"HTTP {status}"):
        make(scripted_openai, max_retries=3).chat(MESSAGES)
    assert scripted_openai.calls == 1


def test_timeout_is_retried_then_unavailable(scripted_openai):
    scripted_openai.default = Slow(5, then={"name": "Ana", "age": 1})
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match="timed out") as info:
        make(scripted_openai, timeout_s=0.3, max_retries=1).chat(MESSAGES, response_model=Answer)
    assert isinstance(info.value.__cause__, openai.APITimeoutError)
    assert scripted_openai.calls == 2
    assert time.monotonic() - started < 3


def test_deadline_bounds_retries_and_request_time(scripted_openai):
    scripted_openai.default = Slow(5)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable):
        make(scripted_openai, timeout_s=30, max_retries=10, sleep=time.sleep, backoff_s=0.05).chat(
            MESSAGES, deadline=time.monotonic() + 0.6
        )
    assert time.monotonic() - started < 1.5


def test_a_trickling_answer_is_cut_at_the_request_timeout(scripted_openai):
    # one byte every 50 ms: every read is far inside any per-read timeout; the answer would take
    # about 15 s in all. The request timeout bounds the whole request, not the gap between bytes.
    scripted_openai.default = Trickle(0.05, JSONReply({"name": "Ana", "age": 31, "pad": "x" * 200}))
    started = time.monotonic()
    with pytest.raises(LLMUnavailable, match="timed out") as info:
        make(scripted_openai, timeout_s=0.8, max_retries=0).chat(MESSAGES, response_model=Answer)
    assert isinstance(info.value.__cause__, openai.APITimeoutError)
    assert time.monotonic() - started < 1.3


def test_a_trickling_answer_is_cut_at_the_deadline_and_the_client_still_works(scripted_openai):
    scripted_openai.script(Trickle(0.05, JSONReply({"name": "Ana", "age": 31, "pad": "x" * 200})))
    scripted_openai.default = JSONReply({"name": "Ana", "age": 31})
    chat = make(scripted_openai, timeout_s=30, max_retries=5, sleep=time.sleep, backoff_s=0.05)
    started = time.monotonic()
    with pytest.raises(LLMUnavailable):
        chat.chat(MESSAGES, response_model=Answer, deadline=time.monotonic() + 0.7)
    assert time.monotonic() - started < 1.2
    assert chat.chat(MESSAGES, response_model=Answer).parsed == Answer(name="Ana", age=31)


def test_a_fast_answer_under_a_bound_is_untouched(scripted_openai):
    scripted_openai.default = Trickle(0.001, JSONReply({"name": "Ana", "age": 31}))
    result = make(scripted_openai, timeout_s=5).chat(MESSAGES, response_model=Answer)
    assert result.parsed == Answer(name="Ana", age=31)


def test_unreachable_endpoint_is_unavailable():
    with ScriptedOpenAI() as srv:
        url = srv.base_url
    chat = OpenAIChat(base_url=url, model="m", timeout_s=2, max_retries=1, sleep=lambda s: None)
    with pytest.raises(LLMUnavailable, match="cannot reach") as info:
        chat.chat(MESSAGES)
    assert isinstance(info.value.__cause__, openai.APIConnectionError)


def test_budget_caps_calls_and_clamps_tokens(scripted_openai):
    scripted_openai.default = Malformed("nope")
    budget = Budget(max_calls=2)
    with pytest.raises(LLMBudgetExceeded, match="2 of 2 calls"):
        make(scripted_openai).chat(MESSAGES, response_model=Answer, budget=budget)
    assert scripted_openai.calls == 2 and budget.calls == 2

    scripted_openai.default = Reply("ok", usage=(50, 5))
    budget = Budget(max_tokens=1_000)
    make(scripted_openai).chat(MESSAGES, max_tokens=5_000, budget=budget)
    assert scripted_openai.last_request["max_tokens"] < 1_000  # lowered to what is left
    assert budget.used_tokens == 55
    with pytest.raises(LLMBudgetExceeded, match="token budget"):
        make(scripted_openai).chat([{"role": "user", "content": "word " * 2_000}], budget=budget)


def test_tool_calls_round_trip(scripted_openai):
    tools = [{"type": "function", "function": {"name": "run", "parameters": {"type": "object"}}}]
    first = ToolCalls([("run", {"argv": ["git", "log"]}, "call_1")])
    scripted_openai.script(first, JSONReply({"name": "Ana", "age": 2}))
    chat = make(scripted_openai)
    result = chat.chat(MESSAGES, tools=tools, response_model=Answer)
    assert result.parsed is None and result.finish_reason == "tool_calls"
    assert result.tool_calls == (ToolCall("call_1", "run", '{"argv": ["git", "log"]}'),)
    assert result.tool_calls[0].args() == {"argv": ["git", "log"]}
    assert "response_format" not in scripted_openai.last_request
    follow = [
        *MESSAGES,
        result.message,
        {"role": "tool", "tool_call_id": "call_1", "content": "abc"},
    ]
    final = chat.chat(follow, tools=tools, response_model=Answer)
    assert final.parsed == Answer(name="Ana", age=2)
    assert scripted_openai.last_request["messages"][2]["tool_calls"][0]["id"] == "call_1"
    with pytest.raises(LLMBadOutput):
        ToolCall("c", "run", "{oops").args()


def _instances() -> list[openai.OpenAIError]:
    request = httpx2.Request("POST", "http://x/v1/chat/completions")

    def response(status: int) -> httpx2.Response:
        return httpx2.Response(status, request=request)

    found: list[openai.OpenAIError] = []
    for name in openai.__all__:
        cls = getattr(openai, name, None)
        if not (isinstance(cls, type) and issubclass(cls, openai.OpenAIError)):
            continue
        if issubclass(cls, openai.APIStatusError):
            status = getattr(cls, "status_code", 500)
            status = status if isinstance(status, int) else 500
            if cls is openai.OAuthError:
                found.append(cls(response=response(401), body=None))
            else:
                found.append(cls("boom", response=response(status), body=None))
        elif cls is openai.APITimeoutError:
            found.append(cls(request=request))
        elif cls is openai.APIConnectionError:
            found.append(cls(request=request))
        elif cls is openai.APIResponseValidationError:
            found.append(cls(response(200), None))
        elif cls is openai.APIError:
            found.append(cls("boom", request, body=None))
        elif cls in (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError):
            found.append(cls.__new__(cls))
        else:
            try:
                found.append(cls("boom"))
            except TypeError:
                found.append(cls.__new__(cls))
    return found


def test_every_openai_error_maps_into_the_tree():
    instances = _instances()
    assert len(instances) >= 15
    for exc in instances:
        mapped = translate_error(exc, "m")
        assert isinstance(mapped, LLMError), type(exc)
        assert not mapped.permanent
    request = httpx2.Request("POST", "http://x")
    expect = {
        429: LLMUnavailable,
        500: LLMUnavailable,
        503: LLMUnavailable,
        408: LLMUnavailable,
        401: LLMRejected,
        404: LLMRejected,
        400: LLMRejected,
    }
    for status, kind in expect.items():
        exc = openai.APIStatusError(
            "x", response=httpx2.Response(status, request=request), body=None
        )
        assert type(translate_error(exc)) is kind
    assert type(translate_error(openai.APITimeoutError(request=request))) is LLMUnavailable
    assert (
        type(
            translate_error(
                openai.APIResponseValidationError(httpx2.Response(200, request=request), None)
            )
        )
        is LLMBadOutput
    )


def test_from_settings_picks_the_role_model(scripted_openai):
    settings = Settings(
        llm_base_url=scripted_openai.base_url,
        llm_api_key="sk-x",
        writer_model="w-model",
        retrieval_model="r-model",
        llm_timeout_s=7,
        llm_max_retries=1,
    )
    writer = OpenAIChat.from_settings(settings, "writer")
    retrieval = OpenAIChat.from_settings(settings, "retrieval")
    assert (writer.model, retrieval.model, writer.timeout_s, writer.max_retries) == (
        "w-model",
        "r-model",
        7,
        1,
    )
    scripted_openai.script("hi")
    assert retrieval.chat(MESSAGES).content == "hi"
    assert scripted_openai.last_request["model"] == "r-model"
    assert scripted_openai.request_headers[-1]["authorization"] == "Bearer sk-x"
    writer.close()
    retrieval.close()


def test_settings_from_env_reads_the_llm_variables():
    settings = Settings.from_env(
        {
            "MEMREPO_LLM_TIMEOUT_S": "12.5",
            "MEMREPO_LLM_MAX_RETRIES": "5",
            "MEMREPO_LLM_JSON_MODE": "off",
            "MEMREPO_WRITER_MAX_LLM_CALLS": "4",
            "MEMREPO_WRITER_MAX_LLM_TOKENS": "9000",
            "MEMREPO_WRITER_DEADLINE_S": "30",
            "MEMREPO_ONTOLOGY": "/etc/onto.json",
        },
        store_url="memory://",
    )
    assert (
        settings.llm_timeout_s == 12.5
        and settings.llm_max_retries == 5
        and settings.llm_json_mode == "off"
    )
    assert (settings.writer_max_llm_calls, settings.writer_max_llm_tokens) == (4, 9000)
    assert settings.writer_deadline_s == 30 and str(settings.ontology_path) == "/etc/onto.json"


def test_importing_the_llm_port_and_client_loads_no_sdk():
    code = (
        "import sys, memrepo.llm, memrepo.llm.client, memrepo.writer\n"
        "print('openai' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
