"""The main job over the real local stack: Pub/Sub emulator → writer function (functions-framework)
→ bundles on fake-gcs-server → retrieval function over HTTP.

Marked ``stack``: starts the Pub/Sub emulator (Java), fake-gcs-server and both functions once per
module (about 5-10 s), and stops them by PID afterwards.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import LOCOMO, commits, event, gcs_repos, running_stack, wait_for
from memrepo import locomo
from memrepo.adapters.gcs import GCSStore
from memrepo.adapters.pubsub import SessionPublisher
from memrepo.devstack.stack import Stack
from memrepo.events import parse_session_ended
from memrepo.repos import UserRepos
from test_store_contract import contract

pytestmark = pytest.mark.stack
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    with running_stack(
        writer=ROOT / "functions" / "writer",
        retrieval=ROOT / "functions" / "retrieval",
        min_backoff_seconds=1,
        max_backoff_seconds=2,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def repos(stack: Stack) -> UserRepos:
    return gcs_repos(stack)



def ask(stack: Stack, user: str, text: str, max_tokens: int = 2000) -> dict:
    body = json.dumps(
        {
            "user_id": user,
            "conversation": [{"role": "user", "content": text}],
            "max_tokens": max_tokens,
        }
    ).encode()
    request = urllib.request.Request(
        stack.retrieval_url or "",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1 only
        return json.loads(response.read())


def test_gcs_store_contract_on_fake_gcs_server(stack: Stack):
    contract(GCSStore(stack.bucket, "contract", client=stack.storage_client()))


@pytest.mark.skipif(not LOCOMO.exists(), reason=f"{LOCOMO} not present")
def test_locomo_conversation_end_to_end_over_pubsub(stack: Stack, repos: UserRepos):
    item = next(i for i in locomo.load(LOCOMO) if i["sample_id"] == "conv-30")
    conv = locomo.conversation(item, "jon")
    SessionPublisher(stack.topic_path).publish_all(list(conv.events))
    wanted = {e.session_id for e in conv.events}
    wait_for(lambda: set(commits(repos, "jon")) >= wanted, timeout=120)
    assert sorted(commits(repos, "jon")) == sorted(wanted)
    hit = ask(stack, "jon", "When did Jon open his dance studio?")
    assert hit["engine"] == "deterministic" and 0 < hit["tokens_used"] <= 2000
    assert "opening night" in hit["context"] or "studio" in hit["context"]


def test_one_event_delivered_three_times_makes_one_commit(stack: Stack, repos: UserRepos):
    data = json.dumps(event(user_id="triple", session_id="t1")).encode()
    for _ in range(3):
        stack.publish(data)
    wait_for(lambda: commits(repos, "triple"))
    time.sleep(3)  # let the other two deliveries land
    assert commits(repos, "triple") == ["t1"]


def test_ten_events_for_one_user_at_once_make_ten_commits(stack: Stack, repos: UserRepos):
    events = [parse_session_ended(event(user_id="ten", session_id=f"s{n}")) for n in range(10)]
    barrier = threading.Barrier(10)

    def publish(e) -> None:
        barrier.wait()
        stack.publish(json.dumps(e.model_dump(mode="json")).encode())

    threads = [threading.Thread(target=publish, args=(e,)) for e in events]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wait_for(lambda: len(commits(repos, "ten")) == 10, timeout=120)
    assert sorted(commits(repos, "ten")) == sorted(f"s{n}" for n in range(10))


def test_poison_event_is_acknowledged_not_dead_lettered(stack: Stack, repos: UserRepos):
    stack.publish(b"this is not json")
    stack.publish(json.dumps(event(user_id="../escape")).encode())
    # acknowledged with a logged reason: nothing written, nothing redelivered to the dead letters
    time.sleep(4)
    assert stack.pull_dead_letters(min_messages=1, timeout=2) == []
    assert not any(k.startswith("users/..") for k in repos.store.list(""))


def test_user_without_memory_over_http(stack: Stack):
    answer = ask(stack, "nobody", "hello?", 100)
    assert answer["context"] == "" and answer["tokens_used"] == 0
