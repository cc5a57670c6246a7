"""The bot client without the cloud: retries only on 429/503/connection errors, typed results,
events validated before publishing, ID tokens cached until near expiry, no SDK at import."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers import event
from memrepo.client import (
    BearerToken,
    ContextResponse,
    GoogleIdToken,
    MemoryClient,
    RetrievalRejected,
    RetrievalUnavailable,
)
from memrepo.errors import InvalidEvent, InvalidRequest, Unauthorized
from memrepo.events import SessionEnded

BLOCK = {"source": "memories/people/sarah.md", "kind": "file", "tokens": 7, "reason": "r"}
OK = {"context": "Sarah works at the bakery.", "blocks": [BLOCK], "tokens_used": 7,
      "engine": "deterministic", "elapsed_ms": 3.2, "metadata": {}}


class Scripted:
    """An HTTP server answering from a script of ``(status, body, headers, delay_s)``."""

    def __init__(self, script: list[tuple[int, object, dict[str, str], float]]) -> None:
        self.script = list(script)
        self.requests: list[tuple[dict[str, str], bytes]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests.append(({k.lower(): v for k, v in self.headers.items()}, body))
                status, payload, headers, delay = owner.script.pop(0)
                time.sleep(delay)
                data = json.dumps(payload).encode()
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def serve() -> Iterator:
    servers: list[Scripted] = []

    def start(*script):
        servers.append(Scripted(list(script)))
        return servers[-1]

    yield start
    for s in servers:
        s.httpd.shutdown()
        s.httpd.server_close()


def client(url: str, **kw) -> MemoryClient:
    return MemoryClient(retrieval_url=url, sleep=lambda s: None, **kw)


ASK = [{"role": "user", "content": "How is Sarah?"}]


def test_retries_503_and_429_then_returns_a_typed_context(serve):
    srv = serve((503, {"error": "busy"}, {"Retry-After": "1"}, 0), (429, {}, {}, 0),
                (200, OK, {}, 0))
    waits: list[float] = []
    c = MemoryClient(retrieval_url=srv.url, auth=BearerToken("tok"), sleep=waits.append)
    result = c.get_context("ana", ASK, max_tokens=500, headers={"traceparent": "00-a-b-01"})
    assert isinstance(result, ContextResponse) and result.blocks[0].tokens == 7
    assert result.context == OK["context"] and result.engine == "deterministic"
    assert len(srv.requests) == 3 and waits[0] == 1.0  # Retry-After honoured
    headers, body = srv.requests[-1]
    assert headers["authorization"] == "Bearer tok" and headers["traceparent"] == "00-a-b-01"
    assert json.loads(body) == {"user_id": "ana", "conversation": ASK, "max_tokens": 500}


@pytest.mark.parametrize(("status", "error"), [
    (400, InvalidRequest), (401, Unauthorized), (403, Unauthorized), (500, RetrievalRejected),
    (502, RetrievalRejected), (404, RetrievalRejected)])
def test_other_statuses_are_not_retried(serve, status, error):
    srv = serve((status, {"error": "no"}, {}, 0))
    with pytest.raises(error, match=f"HTTP {status}"):
        client(srv.url).get_context("ana", ASK)
    assert len(srv.requests) == 1


def test_a_body_that_is_no_context_is_rejected(serve):
    srv = serve((200, {"hello": 1}, {}, 0))
    with pytest.raises(RetrievalRejected, match="not a context"):
        client(srv.url).get_context("ana", ASK)


def test_connection_errors_and_timeouts_are_retried_then_reported(serve):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/"
    with pytest.raises(RetrievalUnavailable, match="3 attempts"):
        client(closed, max_attempts=3).get_context("ana", ASK)
    slow = serve((200, OK, {}, 1.0), (200, OK, {}, 0))
    result = client(slow.url, timeout_s=0.3).get_context("ana", ASK)
    assert result.tokens_used == 7 and len(slow.requests) == 2


def test_a_bad_conversation_fails_locally(serve):
    srv = serve()
    with pytest.raises(InvalidRequest):
        client(srv.url).get_context("ana", [{"role": "robot", "content": "x"}])
    assert srv.requests == []


class FakePublisher:
    """The publisher port: ``publish_all(events, timeout_s) -> message ids``."""

    def __init__(self) -> None:
        self.published: list[SessionEnded] = []

    def publish_all(self, events, timeout_s=60.0):
        self.published += events
        return [f"m{len(self.published)}"]


def test_publish_validates_the_event_before_publishing():
    publisher = FakePublisher()
    c = MemoryClient(publisher=publisher, max_transcript_bytes=100)
    good = event()
    assert c.publish_session_end("ana", "s1", good["turns"]) == "m1"
    assert publisher.published[0].user_id == "ana" and publisher.published[0].session_id == "s1"
    with pytest.raises(InvalidEvent):
        c.publish_session_end("../x", "s2", good["turns"])
    with pytest.raises(InvalidEvent):
        c.publish_session_end("ana", "s2", [{"speaker": "A", "role": "robot", "content": "x"}])
    with pytest.raises(InvalidEvent, match="bytes"):
        c.publish_session_end("ana", "s2", [{"speaker": "A", "role": "user", "content": "x" * 101}])
    assert len(publisher.published) == 1


def _jwt(exp: float) -> str:
    part = base64.urlsafe_b64encode(json.dumps({"exp": exp}).encode()).decode().rstrip("=")
    return f"h.{part}.s"


def test_google_id_tokens_are_cached_until_near_expiry():
    now = [1000.0]
    fetched: list[str] = []

    def fetch(audience: str) -> str:
        fetched.append(audience)
        return _jwt(now[0] + 3600)

    auth = GoogleIdToken("https://f.example/get_context", fetch=fetch, clock=lambda: now[0])
    first = auth.headers()
    now[0] += 3000
    assert auth.headers() == first and len(fetched) == 1
    now[0] += 400  # within the 300 s margin of exp
    assert auth.headers() != first and fetched == ["https://f.example/get_context"] * 2


def test_importing_the_client_loads_no_google_library():
    code = ("import sys, memrepo.client\n"  # (the bare google.cloud namespace comes from a .pth)
            "print([m for m in sys.modules if m.startswith(('google.cloud.', 'google.oauth2', "
            "'google.auth', 'google.api_core'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
