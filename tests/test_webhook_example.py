"""The webhook example (examples/webhook): a scripted stream of messages becomes the expected
sessions; the outbox survives a failing publisher; concurrent messages never fork a session."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fakes import InMemoryStore
from memrepo.errors import InvalidEvent

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "webhook"
sys.path.insert(0, str(EXAMPLE))

from grouping import (  # noqa: E402
    ClosedSession,
    MemoryStateStore,
    Message,
    ObjectStateStore,
    SessionGrouper,
    WebhookService,
)

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def stream(service: WebhookService, clock: Clock) -> list[str]:
    """Replay the script; return the published session ids in order."""
    published: list[str] = []

    def msg(minute: float, user: str, speaker: str, role: str, text: str, end: bool = False):
        clock.now = at(minute)
        published.extend(service.receive(Message(user, speaker, role, text, at(minute), end)))

    def flush(minute: float) -> None:
        clock.now = at(minute)
        published.extend(service.flush())

    msg(0, "ana", "Ana", "user", "My sister Sarah starts at the bakery on Monday.")
    msg(0.1, "ana", "Bot", "assistant", "Congratulations to Sarah!")
    msg(2, "bob", "Bob", "user", "Hello there.")
    msg(10, "ana", "Ana", "user", "See you later.")
    flush(35)  # bob silent for 33 min: closed; ana silent for 25 min: kept open
    msg(60, "ana", "Ana", "user", "I'm back, Sarah got the job.")  # 50 min later: a new session
    msg(61, "ana", "Ana", "user", "Bye for now.", end=True)
    flush(120)  # nothing left open
    return published


def make(states=None, fail: int = 0):
    clock = Clock()
    sent: list[ClosedSession] = []
    failures = [fail]

    def publish(session: ClosedSession) -> str:
        if failures[0] > 0:
            failures[0] -= 1
            raise ConnectionError("Pub/Sub unreachable")
        sent.append(session)
        return session.session_id

    grouper = SessionGrouper(timedelta(minutes=30), clock=clock)
    return WebhookService(grouper, states or MemoryStateStore(), publish), clock, sent


@pytest.mark.parametrize("states", [MemoryStateStore, lambda: ObjectStateStore(InMemoryStore())])
def test_a_scripted_stream_becomes_the_expected_sessions(states):
    service, clock, sent = make(states())
    published = stream(service, clock)
    assert [(s.user_id, len(s.turns), s.reason) for s in sent] == [
        ("bob", 1, "idle"), ("ana", 3, "idle"), ("ana", 2, "end")]
    assert published == [s.session_id for s in sent]
    bob, ana1, ana2 = sent
    assert ana1.occurred_at == at(0) and ana2.occurred_at == at(60) and bob.occurred_at == at(2)
    assert [t["speaker"] for t in ana1.turns] == ["Ana", "Bot", "Ana"]
    assert ana1.turns[1] == {"speaker": "Bot", "role": "assistant",
                             "content": "Congratulations to Sarah!"}
    assert ana2.turns[-1]["content"] == "Bye for now."
    assert ana1.session_id.startswith("20240501T090000Z-")
    again, clock2, sent2 = make(states())  # the same messages give the same session ids
    assert stream(again, clock2) == published


def test_a_failing_publisher_keeps_sessions_in_the_outbox_until_a_later_call():
    service, clock, sent = make(fail=1)
    clock.now = at(0)
    assert service.receive(Message("ana", "Ana", "user", "One.", at(0), end=True)) == []
    assert sent == [] and service.states.get("ana")[0].outbox  # kept, not lost
    clock.now = at(1)
    assert len(service.flush()) == 1 and len(sent) == 1
    assert service.states.get("ana")[0].outbox == []


def test_concurrent_messages_of_one_user_never_fork_a_session():
    store = InMemoryStore()
    states = ObjectStateStore(store)
    service, clock, sent = make(states)
    service.receive(Message("ana", "Ana", "user", "First.", at(0)))
    sneaked: list[bool] = []

    def concurrent(op: str, key: str) -> None:
        if op == "put" and not sneaked:  # another request lands a message just before our write
            sneaked.append(True)
            store.before = None
            service.receive(Message("ana", "Bot", "assistant", "Second.", at(1)))
            store.before = concurrent

    store.before = concurrent
    service.receive(Message("ana", "Ana", "user", "Third.", at(2), end=True))
    assert len(sent) == 1
    assert [t["content"] for t in sent[0].turns] == ["First.", "Second.", "Third."]


def test_the_http_function_groups_and_validates(monkeypatch):
    from functions_framework import create_app

    app = create_app("webhook", str(EXAMPLE / "main.py"), "http")
    module = next(m for m in sys.modules.values()
                  if str(getattr(m, "__file__", "")).endswith("examples/webhook/main.py"))
    service, clock, sent = make()
    monkeypatch.setattr(module, "service", lambda: service)
    client = app.test_client()
    r = client.post("/", json={"user_id": "ana", "speaker": "Ana", "text": "Hi.",
                               "at": at(0).isoformat()})
    assert r.status_code == 200 and r.get_json() == {"published": []}
    r = client.post("/", json={"user_id": "ana", "speaker": "Ana", "text": "Bye.", "end": True,
                               "at": at(1).isoformat()})
    assert r.get_json()["published"] == [sent[0].session_id] and len(sent[0].turns) == 2
    assert client.post("/", json={"user_id": "../x", "text": "x"}).status_code == 400
    assert client.post("/", json={"user_id": "a", "role": "robot"}).status_code == 400
    assert client.post("/flush").get_json() == {"published": []}
    assert client.get("/").status_code == 405


def test_parse_message_refuses_bad_input():
    import importlib.util

    spec = importlib.util.spec_from_file_location("webhook_example_main", EXAMPLE / "main.py")
    assert spec is not None and spec.loader is not None
    main = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(main)
    with pytest.raises(InvalidEvent):
        main.parse_message({"user_id": "ana", "at": "yesterday"})
    assert main.parse_message({"user_id": "ana", "text": "hi"}).role == "user"
