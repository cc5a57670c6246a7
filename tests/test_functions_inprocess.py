"""Both functions served in-process by functions-framework (``create_app(...).test_client()``).

Covers the context-request cases of ../shared/cases/events.md and the two CloudEvent shapes the
writer receives: what Eventarc delivers in production (binary CloudEvent over HTTP) and what a
Pub/Sub push subscription delivers locally (a plain push body that functions-framework converts).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import pytest
from functions_framework import create_app
from helpers import commits, event
from memrepo import bootstrap
from memrepo.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "s3cret-token"


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMREPO_STORE", (tmp_path / "store").as_uri())
    monkeypatch.delenv("MEMREPO_AUTH_TOKEN", raising=False)
    for name in ("OPENROUTER_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


def _app(name: str, target: str, signature: str):
    app = create_app(target, str(ROOT / "functions" / name / "main.py"), signature)
    for module in list(sys.modules.values()):  # settings are cached per instance: reset per test
        if str(getattr(module, "__file__", "")).endswith(f"functions/{name}/main.py"):
            module._settings.cache_clear()
    return app.test_client()


@pytest.fixture
def writer_client(env):
    return _app("writer", "on_session_ended", "cloudevent")


@pytest.fixture
def retrieval_client(env):
    return _app("retrieval", "get_context", "http")


def _push_body(payload: dict, **message) -> dict:
    data = base64.b64encode(json.dumps(payload).encode()).decode()
    return {
        "message": {
            "data": data,
            "messageId": "101",
            "publishTime": "2024-05-01T07:30:00Z",
            **message,
        },
        "subscription": "projects/demo/subscriptions/writer-push",
    }


def _repos():
    import os

    return bootstrap.repos(Settings.from_env(os.environ))


def test_push_subscription_shape(writer_client):
    response = writer_client.post("/", json=_push_body(event(), attributes={"user_id": "ana"}))
    assert response.status_code == 200
    assert commits(_repos(), "ana") == ["s1"]


def test_eventarc_binary_cloudevent_shape(writer_client):
    body = _push_body(event(session_id="s2"), orderingKey="ana")
    del body["subscription"]
    body["message"]["message_id"] = body["message"].pop("messageId")
    headers = {
        "ce-id": "101",
        "ce-specversion": "1.0",
        "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
        "ce-source": "//pubsub.googleapis.com/projects/demo/topics/session-ended",
        "Content-Type": "application/json",
    }
    response = writer_client.post("/", json=body, headers=headers)
    assert response.status_code == 200
    assert commits(_repos(), "ana") == ["s2"]


def test_permanent_error_is_acknowledged(writer_client):
    response = writer_client.post("/", json=_push_body(event(user_id="../bob")))
    assert response.status_code == 200  # acknowledged: a redelivery could never succeed
    assert _repos().store.list("") == []


def test_transient_error_fails_for_redelivery(writer_client, env, monkeypatch):
    store_dir = env / "store"
    store_dir.mkdir(parents=True, exist_ok=True)
    (store_dir / "objects").write_text("not a directory")  # every write now fails with OSError
    response = writer_client.post("/", json=_push_body(event()))
    assert response.status_code == 500


def _ask(client, body, headers=None):
    return client.post(
        "/",
        data=body if isinstance(body, bytes | str) else json.dumps(body),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def test_context_end_to_end(writer_client, retrieval_client):
    assert writer_client.post("/", json=_push_body(event())).status_code == 200
    response = _ask(
        retrieval_client,
        {
            "user_id": "ana",
            "conversation": [{"role": "user", "content": "When does Sarah start at the bakery?"}],
            "max_tokens": 300,
        },
    )
    assert response.status_code == 200
    body = response.get_json()
    assert "Sarah starts at the bakery" in body["context"]
    assert body["engine"] == "deterministic"
    assert 0 < body["tokens_used"] <= 300
    assert {"source", "kind", "tokens", "reason"} <= set(body["blocks"][0])
    assert body["elapsed_ms"] >= 0


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"", "empty"),
        (b"{not json", "not JSON"),
        ([1, 2], "JSON object"),
        ({"user_id": "ana", "conversation": "hello", "max_tokens": 100}, "list"),
        ({"user_id": "ana", "conversation": [{"role": "user"}], "max_tokens": 100}, "content"),
        (
            {
                "user_id": "ana",
                "conversation": [{"role": "wizard", "content": "x"}],
                "max_tokens": 100,
            },
            "role",
        ),
        ({"user_id": "ana", "conversation": [], "max_tokens": 0}, "max_tokens"),
        ({"user_id": "ana", "conversation": [], "max_tokens": -5}, "max_tokens"),
        ({"user_id": "ana", "conversation": [], "max_tokens": 10_000_000}, "max_tokens"),
        ({"user_id": "ana", "conversation": [], "max_tokens": "100"}, "integer"),
        ({"user_id": "../bob", "conversation": [], "max_tokens": 100}, "user_id"),
    ],
)
def test_bad_context_requests(retrieval_client, body, fragment):
    response = _ask(retrieval_client, body)
    assert response.status_code == 400
    assert fragment in response.get_json()["error"]


def test_user_without_memory_gets_empty_valid_context(retrieval_client):
    response = _ask(
        retrieval_client,
        {
            "user_id": "nobody-yet",
            "conversation": [{"role": "user", "content": "hi"}],
            "max_tokens": 500,
        },
    )
    assert response.status_code == 200
    body = response.get_json()
    assert body["context"] == "" and body["blocks"] == [] and body["tokens_used"] == 0


def test_get_is_refused(retrieval_client):
    assert retrieval_client.get("/").status_code == 405


@pytest.fixture
def auth_client(env, monkeypatch):
    monkeypatch.setenv("MEMREPO_AUTH_TOKEN", TOKEN)
    return _app("retrieval", "get_context", "http")


@pytest.mark.parametrize(
    "header", [None, "Bearer wrong", f"Basic {TOKEN}", "Bearer", f"bearer {TOKEN}x"]
)
def test_missing_or_wrong_bearer_token(auth_client, header):
    headers = {"Authorization": header} if header else {}
    response = _ask(auth_client, {"user_id": "ana", "conversation": [], "max_tokens": 100}, headers)
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"] == "Bearer"


def test_right_bearer_token(auth_client):
    response = _ask(
        auth_client,
        {"user_id": "ana", "conversation": [], "max_tokens": 100},
        {"Authorization": f"Bearer {TOKEN}"},
    )
    assert response.status_code == 200


def test_python_api_export_and_delete(tmp_path):
    import subprocess

    import memrepo

    ana = memrepo.open((tmp_path / "s").as_uri(), "ana")
    bob = memrepo.open((tmp_path / "s").as_uri(), "bob")
    ana.write_session(event(user_id="ana"))
    bob.write_session(event(user_id="bob", session_id="b1"))
    bundle = tmp_path / "ana.bundle"
    bundle.write_bytes(ana.export() or b"")
    subprocess.run(
        ["git", "clone", "-q", "-b", "user/ana", str(bundle), str(tmp_path / "c")], check=True
    )
    assert (tmp_path / "c" / "sessions" / "2024" / "05" / "s1.md").exists()
    bob_before = bob.export()
    assert ana.delete() == 2  # the manifest and its base bundle
    assert ana.export() is None and bob.export() == bob_before
    assert ana.context([{"role": "user", "content": "Sarah?"}]).text == ""
