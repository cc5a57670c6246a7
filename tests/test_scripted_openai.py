"""Tests for the scripted OpenAI-compatible server, driven by the real ``openai`` client."""

import json
import threading
import time
from collections.abc import Iterator

import openai
import pytest
from scripted_openai import (
    Callable,
    JSONReply,
    Malformed,
    Reply,
    ScriptedOpenAI,
    Slow,
    Status,
    ToolCalls,
)

MESSAGES = [{"role": "user", "content": "hi"}]


@pytest.fixture
def srv() -> Iterator[ScriptedOpenAI]:
    """A running server, stopped after the test."""
    with ScriptedOpenAI() as server:
        yield server


@pytest.fixture
def client(srv: ScriptedOpenAI) -> openai.OpenAI:
    """An SDK client without retries and with a 5 s timeout."""
    return openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=5.0)


def chat(client: openai.OpenAI, **kwargs: object) -> openai.types.chat.ChatCompletion:
    """Issues one chat completion call with default model and messages."""
    params: dict[str, object] = {"model": "gpt-test", "messages": MESSAGES}
    params.update(kwargs)
    return client.chat.completions.create(**params)  # type: ignore[call-overload,no-any-return]


def test_base_url_and_lifecycle() -> None:
    srv = ScriptedOpenAI()
    assert not srv.running
    with pytest.raises(RuntimeError):
        _ = srv.base_url
    srv.start()
    try:
        assert srv.running
        assert srv.base_url == f"http://127.0.0.1:{srv.port}/v1"
        assert srv.port > 0
        with pytest.raises(RuntimeError):
            srv.start()
    finally:
        srv.stop()
    assert not srv.running
    srv.stop()  # idempotent


def test_normal_reply(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Reply("hello there", usage=(12, 3)))
    resp = chat(client)
    assert resp.object == "chat.completion"
    assert resp.id.startswith("chatcmpl-")
    assert resp.created > 0
    assert resp.model == "gpt-test"
    choice = resp.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "hello there"
    assert choice.message.tool_calls is None
    assert resp.usage is not None
    assert (resp.usage.prompt_tokens, resp.usage.completion_tokens) == (12, 3)
    assert resp.usage.total_tokens == 15


def test_default_usage_is_estimated(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Reply("x" * 40))
    usage = chat(client).usage
    assert usage is not None
    assert usage.completion_tokens == 10
    assert usage.prompt_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_finish_reason_length(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Reply("trunc", finish_reason="length"))
    assert chat(client).choices[0].finish_reason == "length"


def test_json_reply(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    obj = {"files": ["index.md", "people/ann.md"], "n": 2}
    srv.script(JSONReply(obj))
    content = chat(client).choices[0].message.content
    assert content is not None
    assert json.loads(content) == obj


def test_malformed_reply(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Malformed('{"files": ['))
    content = chat(client).choices[0].message.content
    assert content == '{"files": ['
    with pytest.raises(json.JSONDecodeError):
        json.loads(content)


def test_shorthands(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script("plain", {"a": 1})
    assert chat(client).choices[0].message.content == "plain"
    assert chat(client).choices[0].message.content == '{"a": 1}'


def test_tool_calls_parsed_by_sdk(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    calls = ToolCalls(
        [("run", {"command": "cat index.md"}), ("run", {"command": "ls"}, "call_fixed")]
    )
    srv.script(calls)
    resp = chat(client)
    choice = resp.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    tool_calls = choice.message.tool_calls
    assert tool_calls is not None and len(tool_calls) == 2
    first, second = tool_calls
    assert first.type == "function"
    assert first.function.name == "run"
    assert json.loads(first.function.arguments) == {"command": "cat index.md"}
    assert first.id.startswith("call_") and first.id != second.id
    assert second.id == "call_fixed"
    assert [first.id, second.id] == calls.ids


def test_rate_limit_raises(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Status(429, headers={"retry-after": "0"}))
    with pytest.raises(openai.RateLimitError) as info:
        chat(client)
    assert info.value.status_code == 429
    assert info.value.response.headers["retry-after"] == "0"
    assert info.value.code == "rate_limit_exceeded"
    assert isinstance(info.value.body, dict) and "message" in info.value.body


def test_server_error_raises(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Status(500, message="boom"))
    with pytest.raises(openai.InternalServerError) as info:
        chat(client)
    assert info.value.status_code == 500
    assert "boom" in str(info.value)


def test_custom_error_body(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    body = {"error": {"message": "bad key", "type": "invalid_request_error", "code": "x"}}
    srv.script(Status(401, body=body))
    with pytest.raises(openai.AuthenticationError) as info:
        chat(client)
    assert info.value.code == "x"
    assert "bad key" in str(info.value)


def test_slow_then_answers(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Slow(0.2, then=Reply("late")))
    t0 = time.monotonic()
    assert chat(client).choices[0].message.content == "late"
    assert time.monotonic() - t0 >= 0.2


def test_slow_timeout_and_prompt_stop() -> None:
    srv = ScriptedOpenAI().start()
    try:
        srv.script(Slow(30, then=Reply("never")))
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=0.3)
        with pytest.raises(openai.APITimeoutError):
            chat(client)
        assert srv.calls == 1
    finally:
        t0 = time.monotonic()
        srv.stop()
        elapsed = time.monotonic() - t0
    assert elapsed < 1.0


def test_stop_interrupts_inflight_slow_request() -> None:
    srv = ScriptedOpenAI().start()
    srv.script(Slow(30))
    client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0, timeout=10.0)
    errors: list[BaseException] = []

    def call() -> None:
        try:
            chat(client)
        except openai.APIError as exc:
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + 5
    while srv.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    srv.stop()
    assert time.monotonic() - t0 < 1.0
    worker.join(5)
    assert not worker.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], openai.APIConnectionError)


def test_slow_does_not_block_other_requests(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Slow(0.8, then=Reply("slow")), Reply("fast"))
    results: dict[str, str | None] = {}

    def slow_call() -> None:
        results["slow"] = chat(client).choices[0].message.content

    worker = threading.Thread(target=slow_call)
    worker.start()
    deadline = time.monotonic() + 5
    while srv.calls == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    t0 = time.monotonic()
    assert chat(client).choices[0].message.content == "fast"
    assert time.monotonic() - t0 < 0.5
    assert "slow" not in results
    worker.join(5)
    assert results == {"slow": "slow"}


def test_requests_recorded(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "run",
                "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
            },
        }
    ]
    srv.script(Reply("one"), Reply("two"))
    chat(client, temperature=0)
    chat(client, model="other-model", tools=tools)
    assert srv.calls == 2
    first, second = srv.requests
    assert first["model"] == "gpt-test"
    assert first["messages"] == MESSAGES
    assert first["temperature"] == 0
    assert second["model"] == "other-model"
    assert second["tools"] == tools
    assert srv.last_request == second
    assert srv.request_headers[0]["authorization"] == "Bearer test"
    assert srv.remaining == 0


def test_exhausted_script_gives_500(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Reply("only"))
    chat(client)
    with pytest.raises(openai.InternalServerError) as info:
        chat(client)
    assert "script exhausted" in str(info.value)
    assert srv.calls == 2


def test_default_used_when_queue_empty(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.default = Reply("fallback")
    srv.script(Reply("first"))
    assert chat(client).choices[0].message.content == "first"
    assert chat(client).choices[0].message.content == "fallback"
    assert chat(client).choices[0].message.content == "fallback"
    srv.default = None
    with pytest.raises(openai.InternalServerError):
        chat(client)


def test_callable_sees_request(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    def echo(request: dict[str, object]) -> Reply:
        messages = request["messages"]
        assert isinstance(messages, list)
        return Reply(f"echo: {messages[-1]['content']}")

    srv.default = Callable(echo)
    assert chat(client).choices[0].message.content == "echo: hi"
    msgs = [{"role": "user", "content": "again"}]
    assert chat(client, messages=msgs).choices[0].message.content == "echo: again"


def test_callable_error_becomes_500(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    def broken(request: dict[str, object]) -> Reply:
        raise KeyError("nope")

    srv.script(Callable(broken), Reply("still works"))
    with pytest.raises(openai.InternalServerError) as info:
        chat(client)
    assert "KeyError" in str(info.value)
    assert chat(client).choices[0].message.content == "still works"


def test_stream_rejected(srv: ScriptedOpenAI, client: openai.OpenAI) -> None:
    srv.script(Reply("kept"))
    with pytest.raises(openai.BadRequestError) as info:
        chat(client, stream=True)
    assert "stream" in str(info.value)
    assert srv.remaining == 1  # a rejected call does not consume the script
    assert chat(client).choices[0].message.content == "kept"


def test_models_list(client: openai.OpenAI) -> None:
    ids = [m.id for m in client.models.list()]
    assert ids == ["scripted-model"]


def test_unknown_path_is_404(client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="e", input="x")


def test_sdk_retries_on_429() -> None:
    with ScriptedOpenAI() as srv:
        srv.script(Status(429, headers={"retry-after": "0"}), Reply("ok"))
        client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=2, timeout=5.0)
        assert chat(client).choices[0].message.content == "ok"
        assert srv.calls == 2
        assert srv.requests[0] == srv.requests[1]


def test_conftest_fixture(scripted_openai: ScriptedOpenAI) -> None:
    assert scripted_openai.running
    scripted_openai.script(Reply("via fixture"))
    client = openai.OpenAI(base_url=scripted_openai.base_url, api_key="test", max_retries=0)
    assert chat(client).choices[0].message.content == "via fixture"
