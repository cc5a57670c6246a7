"""The bot client and the webhook example over the real local stack: Pub/Sub emulator → writer
function → fake-gcs-server → retrieval function (bearer token required) → typed context.

Marked ``stack``: starts the emulators and both functions once for the module (about 5-10 s).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from helpers import commits, gcs_repos, running_stack, wait_for
from memrepo.adapters.gcs import GCSStore
from memrepo.client import BearerToken, ContextResponse, MemoryClient
from memrepo.devstack.stack import Stack
from memrepo.errors import InvalidEvent, Unauthorized
from memrepo.repos import UserRepos

pytestmark = pytest.mark.stack
ROOT = Path(__file__).resolve().parents[1]
TOKEN = "stack-bearer-token"

sys.path.insert(0, str(ROOT / "examples" / "webhook"))
from grouping import (  # noqa: E402
    ClosedSession,
    Message,
    ObjectStateStore,
    SessionGrouper,
    WebhookService,
)


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with running_stack(
        writer=ROOT / "functions" / "writer",
        retrieval=ROOT / "functions" / "retrieval",
        function_env={"MEMREPO_AUTH_TOKEN": TOKEN, "MEMREPO_ENGINE": "deterministic"},
        min_backoff_seconds=1,
        max_backoff_seconds=2,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def repos(stack: Stack) -> UserRepos:
    return gcs_repos(stack)


@pytest.fixture(scope="module")
def client(stack: Stack) -> MemoryClient:
    return MemoryClient(topic_path=stack.topic_path, retrieval_url=stack.retrieval_url,
                        auth=BearerToken(TOKEN), timeout_s=30)


def test_the_client_publishes_a_session_and_gets_its_context(client, repos):
    turns = [
        {"speaker": "Ana", "role": "user", "content": "My sister Sarah opened a pottery studio."},
        {"speaker": "Bot", "role": "assistant", "content": "How exciting for Sarah!"},
    ]
    message_id = client.publish_session_end(
        "cli-ana", "c1", turns, occurred_at=datetime(2024, 5, 1, 9, 30, tzinfo=UTC),
        metadata={"channel": "test"})
    assert message_id
    wait_for(lambda: commits(repos, "cli-ana") == ["c1"])
    ctx = client.get_context("cli-ana", [{"role": "user", "content": "How is Sarah's pottery?"}],
                             max_tokens=800)
    assert isinstance(ctx, ContextResponse)
    assert "pottery" in ctx.context and 0 < ctx.tokens_used <= 800
    assert ctx.engine == "deterministic" and ctx.blocks


def test_the_client_refuses_bad_events_and_wrong_tokens(client, stack):
    with pytest.raises(InvalidEvent):
        client.publish_session_end("cli-ana", "bad id!", [{"speaker": "A", "role": "user",
                                                          "content": "x"}])
    wrong = MemoryClient(retrieval_url=stack.retrieval_url, auth=BearerToken("nope"))
    with pytest.raises(Unauthorized):
        wrong.get_context("cli-ana", [{"role": "user", "content": "hi"}])


def test_the_webhook_groups_messages_into_committed_sessions(client, repos, stack):
    states = ObjectStateStore(GCSStore(stack.bucket, "webhook", client=stack.storage_client()))
    t0 = datetime.now(UTC) - timedelta(hours=3)
    now = [t0]

    def publish(session: ClosedSession) -> str:
        return client.publish_session_end(session.user_id, session.session_id, session.turns,
                                          occurred_at=session.occurred_at)

    service = WebhookService(SessionGrouper(timedelta(minutes=30), clock=lambda: now[0]),
                             states, publish)
    script = [
        (0, "Ana", "user", "My friend Tom adopted a greyhound.", False),
        (1, "Bot", "assistant", "Lovely, greyhounds are gentle.", False),
        (50, "Ana", "user", "Tom's greyhound is called Biscuit.", False),  # a new session
        (52, "Ana", "user", "Talk soon.", True),
    ]
    published: list[str] = []
    for minute, speaker, role, text, end in script:
        now[0] = t0 + timedelta(minutes=minute)
        published += service.receive(Message("hook-ana", speaker, role, text, now[0], end))
    assert len(published) == 2
    wait_for(lambda: sorted(commits(repos, "hook-ana")) == sorted(published))
    ctx = client.get_context("hook-ana", [{"role": "user", "content": "What is the greyhound "
                                                                      "called?"}])
    assert "Biscuit" in ctx.context
