"""The write path loses nothing (DESIGN.md invariants 1-3), shown by injecting the faults on the
real local stack: Pub/Sub emulator push deliveries, writer functions under functions-framework,
bundles on fake-gcs-server.

Counts in the assertions are exact: N sessions published → N commits, however the deliveries
were duplicated, raced, crashed or failed.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import commits, event, gcs_repos, running_stack, wait_for
from memrepo.devstack.fault_proxy import FaultProxy, every_nth
from memrepo.devstack.functions import FunctionServer, FunctionSpec
from memrepo.devstack.processes import free_port, pid_alive
from memrepo.devstack.stack import Stack
from memrepo.gitcli import git_text
from memrepo.repos import UserRepos
from memrepo.workspace import Workspace

pytestmark = pytest.mark.stack
ROOT = Path(__file__).resolve().parents[1]
WRITER = ROOT / "functions" / "writer" / "main.py"
CRASHY = ROOT / "tests" / "test_functions" / "crashy_writer" / "main.py"


@pytest.fixture(scope="module")
def stack(tmp_path_factory) -> Iterator[Stack]:
    logs = tmp_path_factory.mktemp("stack-logs")
    with running_stack(
        writer=ROOT / "functions" / "writer",
        log_dir=logs,
        min_backoff_seconds=1,
        max_backoff_seconds=2,
    ) as running:
        yield running


@pytest.fixture(scope="module")
def repos(stack: Stack) -> UserRepos:
    return gcs_repos(stack)



def publish_at_once(stack: Stack, payloads: list[dict], *, topic_path: str | None = None) -> None:
    barrier = threading.Barrier(len(payloads))

    def one(payload: dict) -> None:
        barrier.wait()
        stack.publish(json.dumps(payload).encode(), topic_path=topic_path)

    threads = [threading.Thread(target=one, args=(p,)) for p in payloads]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def writer_log_counts(stack: Stack) -> dict[str, int]:
    assert stack.log_dir is not None
    text = (stack.log_dir / "writer.log").read_text(encoding="utf-8", errors="replace")
    return {
        "committed": len(re.findall(r'"message": "session committed"', text)),
        "duplicate": len(re.findall(r'"message": "session duplicate"', text)),
        "conflicts_retried": text.count("bundle changed under us"),
        "redeliveries_requested": text.count("raising for redelivery"),
    }


def history(repos: UserRepos, user: str) -> tuple[int, int, list[str]]:
    """Return (commits, merge commits, transcript files) of the user's branch."""
    ws, _ = repos.checkout(user)
    with ws:
        count = int(git_text(["rev-list", "--count", ws.branch], ws.path))
        merges = int(git_text(["rev-list", "--count", "--merges", ws.branch], ws.path))
        return count, merges, ws.files("sessions/")


def test_twenty_sessions_for_one_user_at_once(stack: Stack, repos: UserRepos):
    before = writer_log_counts(stack)
    started = time.monotonic()
    publish_at_once(stack, [event(user_id="burst", session_id=f"b{n:02d}") for n in range(20)])
    wait_for(lambda: len(commits(repos, "burst")) == 20)
    drained = time.monotonic() - started
    count, merges, transcripts = history(repos, "burst")
    assert (count, merges, len(transcripts)) == (20, 0, 20)
    assert sorted(commits(repos, "burst")) == [f"b{n:02d}" for n in range(20)]
    after = writer_log_counts(stack)
    figures = {k: after[k] - before[k] for k in after}
    print(f"\n20 at once: drained in {drained:.1f} s; {figures}")
    assert figures["committed"] == 20


def test_fifty_sessions_ten_users_each_delivered_twice(stack: Stack, repos: UserRepos):
    payloads = [event(user_id=f"user{n % 10}", session_id=f"m{n:02d}") for n in range(50)]
    publish_at_once(stack, payloads[:25] + payloads[:25])  # the first 25 twice at the same moment
    for payload in payloads[25:]:
        stack.publish(json.dumps(payload).encode())
        stack.publish(json.dumps(payload).encode())
    expected = {
        f"user{u}": sorted(f"m{n:02d}" for n in range(50) if n % 10 == u) for u in range(10)
    }
    wait_for(lambda: sum(len(commits(repos, u)) for u in expected) >= 50)
    time.sleep(2)  # late duplicates must not add anything
    assert {u: sorted(commits(repos, u)) for u in expected} == expected
    for user in expected:
        ws, _ = repos.checkout(user)  # each bundle holds exactly that user's ref
        with ws:
            refs = git_text(["for-each-ref", "--format=%(refname)"], ws.path).split()
            assert refs == [f"refs/heads/user/{user}"]


@pytest.mark.parametrize("crash_at", ["after_hydrate", "after_commit", "during_upload"])
def test_writer_killed_then_redelivered(stack: Stack, repos: UserRepos, crash_at: str):
    user = f"crash-{crash_at.replace('_', '-')}"
    first = event(user_id=user, session_id="before")
    second = event(user_id=user, session_id="victim", occurred_at="2024-05-02T10:00:00+00:00")
    stack.publish(json.dumps(first).encode())
    wait_for(lambda: commits(repos, user) == ["before"])

    port = free_port()
    topic = f"crash-{crash_at}"
    stack.create_push_subscription(
        f"{topic}-push",
        f"http://127.0.0.1:{port}/projects/{stack.project}/topics/{topic}",
        topic=topic,
        min_backoff_seconds=1,
        max_backoff_seconds=2,
    )
    env = {**stack.env(), "CRASH_AT": crash_at}
    crashy = FunctionServer(
        FunctionSpec("on_session_ended", CRASHY, "cloudevent", env), port=port, name="crashy"
    )
    crashy.start()
    assert crashy.process is not None
    pid = crashy.process.pid
    stack.publish(
        json.dumps(second).encode(), topic_path=f"projects/{stack.project}/topics/{topic}"
    )
    wait_for(lambda: not crashy.process.is_running(), timeout=60)  # type: ignore[union-attr]
    crashy.stop()
    assert not pid_alive(pid)

    stored = repos.export(user)  # the stored state (manifest and its bundles) is still valid
    assert stored is not None
    with Workspace.hydrate(stored, user) as ws:
        assert ws.head() is not None
    assert commits(repos, user) in (["before"], ["victim", "before"])

    healthy = FunctionServer(
        FunctionSpec("on_session_ended", WRITER, "cloudevent", stack.env()),
        port=port,
        name="healthy",
    )
    healthy.start()
    try:
        wait_for(lambda: commits(repos, user) == ["victim", "before"], timeout=60)
        time.sleep(2)
        assert commits(repos, user) == ["victim", "before"]
    finally:
        healthy.stop()


@pytest.mark.parametrize(("n", "status"), [(3, 503), (2, 429)])
def test_store_failures_still_land_every_session(
    stack: Stack, repos: UserRepos, n: int, status: int
):
    assert stack.gcs is not None
    with FaultProxy(stack.gcs_url, every_nth(n, status)) as proxy:
        port = free_port()
        topic = f"faulty-{status}"
        stack.create_push_subscription(
            f"{topic}-push",
            f"http://127.0.0.1:{port}/projects/{stack.project}/topics/{topic}",
            topic=topic,
            min_backoff_seconds=1,
            max_backoff_seconds=2,
            max_delivery_attempts=100,
        )
        env = {**stack.env(), "STORAGE_EMULATOR_HOST": proxy.url}
        server = FunctionServer(
            FunctionSpec("on_session_ended", WRITER, "cloudevent", env), port=port, name=topic
        )
        server.start()
        try:
            user = f"faulty{status}"
            for k in range(6):
                stack.publish(
                    json.dumps(event(user_id=user, session_id=f"f{k}")).encode(),
                    topic_path=f"projects/{stack.project}/topics/{topic}",
                )
            wait_for(lambda: len(commits(repos, user)) == 6, timeout=180)
            assert sorted(commits(repos, user)) == [f"f{k}" for k in range(6)]
            assert proxy.injected.get(status, 0) > 0
        finally:
            server.stop()


def test_poison_events_never_loop(stack: Stack, repos: UserRepos):
    before = writer_log_counts(stack)
    poison = [
        b"not json",
        b"",
        json.dumps(event(user_id="../x")).encode(),
        json.dumps(event(user_id="ok-user", turns=[])).encode(),
        json.dumps(
            event(
                user_id="ok-user",
                session_id="big",
                turns=[{"speaker": "A", "role": "user", "content": "x" * 1_100_000}],
            )
        ).encode(),
    ]
    for data in poison:
        if data:
            stack.publish(data)
    time.sleep(5)
    assert stack.pull_dead_letters(min_messages=1, timeout=2) == []
    assert commits(repos, "ok-user") == []
    assert writer_log_counts(stack)["redeliveries_requested"] == before["redeliveries_requested"]


def test_delete_one_user_leaves_others_byte_identical(stack: Stack, repos: UserRepos, tmp_path):
    for user in ("gdpr-a", "gdpr-b"):
        stack.publish(json.dumps(event(user_id=user, session_id="g1")).encode())
    wait_for(lambda: commits(repos, "gdpr-a") and commits(repos, "gdpr-b"))
    others = {
        k: repos.store.get(k).data
        for k in repos.store.list("")
        if not k.startswith("users/gdpr-a/")
    }  # type: ignore[union-attr]

    exported = repos.export("gdpr-a")
    assert exported is not None
    bundle = tmp_path / "a.bundle"
    bundle.write_bytes(exported)
    clone = tmp_path / "clone"
    git_text(["clone", "-q", "--branch", "user/gdpr-a", str(bundle), str(clone)], tmp_path)
    ws, _ = repos.checkout("gdpr-a")
    with ws:
        assert git_text(["rev-parse", "HEAD"], clone) == git_text(["rev-parse", "HEAD"], ws.path)
        assert git_text(["ls-files"], clone) == git_text(["ls-files"], ws.path)

    assert repos.delete("gdpr-a") >= 1
    assert repos.store.list("users/gdpr-a/") == []
    assert commits(repos, "gdpr-a") == []
    assert {k: repos.store.get(k).data for k in others} == others  # type: ignore[union-attr]
