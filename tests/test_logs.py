"""Structured logs: trace fields from request headers, and no transcript text in any log line of
a full write and context through both functions (served in-process by functions-framework)."""

from __future__ import annotations

import base64
import json
import logging
import sys
from pathlib import Path

import pytest
from functions_framework import create_app
from helpers import event
from memrepo import logs

ROOT = Path(__file__).resolve().parents[1]
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"

#: Words that occur in the transcript only (lowercase, so no entity or file is named after them).
SECRET_WORDS = ("marmalade", "xylophone", "quokka", "ventriloquist", "zeppelin")
TURNS = [
    {"speaker": "Ana", "role": "user",
     "content": "My sister Sarah plays the xylophone and sells marmalade to a ventriloquist."},
    {"speaker": "Bot", "role": "assistant",
     "content": "A quokka riding a zeppelin would love that marmalade."},
]


class Capture(logging.Handler):
    """Keep every record formatted exactly as Cloud Logging would receive it."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.formatter = logs.CloudLoggingFormatter()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def capture(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMREPO_STORE", (tmp_path / "store").as_uri())
    monkeypatch.setenv("MEMREPO_ENGINE", "deterministic")
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "demo-project")
    for name in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "MEMREPO_AUTH_TOKEN",
                 "MEMREPO_MIRROR_URL"):
        monkeypatch.delenv(name, raising=False)
    root = logging.getLogger()
    handler, level = Capture(), root.level
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)
    root.setLevel(level)


def _client(name: str, target: str, signature: str):
    app = create_app(target, str(ROOT / "functions" / name / "main.py"), signature)
    for module in list(sys.modules.values()):
        if str(getattr(module, "__file__", "")).endswith(f"functions/{name}/main.py"):
            module._settings.cache_clear()
    return app.test_client()


def test_a_full_write_and_context_log_no_transcript_text(capture):
    writer = _client("writer", "on_session_ended", "cloudevent")
    retrieval = _client("retrieval", "get_context", "http")
    logging.getLogger().setLevel(logging.DEBUG)  # stricter than production's INFO
    data = base64.b64encode(json.dumps(event(session_id="s1", turns=TURNS)).encode()).decode()
    push = {"message": {"data": data, "messageId": "7", "publishTime": "2024-05-01T07:30:00Z"},
            "subscription": "projects/demo/subscriptions/writer-push"}
    assert writer.post("/", json=push).status_code == 200
    question = "Who buys the marmalade and what about the xylophone and the quokka?"
    answer = retrieval.post(
        "/", json={"user_id": "ana", "conversation": [{"role": "user", "content": question}]},
        headers={"X-Cloud-Trace-Context": f"{TRACE}/1;o=1"},
    )
    assert answer.status_code == 200 and "marmalade" in answer.get_json()["context"]

    entries = [json.loads(line) for line in capture.lines]
    committed = [e for e in entries if e["message"] == "session committed"]
    assert committed and committed[0]["user_id"] == "ana" and committed[0]["session_id"] == "s1"
    assert committed[0]["elapsed_ms"] > 0 and committed[0]["severity"] == "INFO"
    served = [e for e in entries if e["message"] == "context served"]
    assert served and served[0]["user_id"] == "ana" and served[0]["elapsed_ms"] >= 0
    assert served[0][logs.TRACE] == f"projects/demo-project/traces/{TRACE}"
    assert served[0][logs.SPAN_ID] == f"{1:016x}" and served[0][logs.TRACE_SAMPLED] is True
    everything = "\n".join(capture.lines).lower()
    for word in SECRET_WORDS:
        assert word not in everything, word
    for turn in TURNS:
        assert turn["content"].lower() not in everything


@pytest.mark.parametrize(("headers", "expected"), [
    ({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-01"},
     {logs.TRACE: f"projects/p/traces/{TRACE}", logs.SPAN_ID: "00f067aa0ba902b7",
      logs.TRACE_SAMPLED: True}),
    ({"X-Cloud-Trace-Context": f"{TRACE.upper()}/123;o=0"},
     {logs.TRACE: f"projects/p/traces/{TRACE}", logs.SPAN_ID: f"{123:016x}",
      logs.TRACE_SAMPLED: False}),
    ({"x-cloud-trace-context": TRACE}, {logs.TRACE: f"projects/p/traces/{TRACE}"}),
    ({"traceparent": "garbage"}, {}),
    ({"traceparent": f"00-{'0' * 32}-00f067aa0ba902b7-01"}, {}),
    ({}, {}),
])
def test_trace_fields(headers, expected):
    assert logs.trace_fields(headers, "p") == expected


def test_trace_without_project_and_bound_fields_reach_every_record():
    assert logs.trace_fields({"traceparent": f"00-{TRACE}-00f067aa0ba902b7-00"}, None) == {
        "trace_id": TRACE, logs.SPAN_ID: "00f067aa0ba902b7", logs.TRACE_SAMPLED: False}
    formatter = logs.CloudLoggingFormatter()
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    with logs.bind(user_id="ana", nothing=None):
        inside = json.loads(formatter.format(record))
    outside = json.loads(formatter.format(record))
    assert inside["user_id"] == "ana" and "nothing" not in inside and "user_id" not in outside
