"""memrepo.devstack against real servers: Pub/Sub emulator, fake-gcs-server, functions-framework.

One stack serves the module (about 5 s to start); its writer and retrieval slots run tiny
functions written here. The dead-letter test waits for five failed pushes (about 13 s).
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from memrepo.devstack import FunctionServer, FunctionSpec, ManagedProcess, Stack
from memrepo.devstack.processes import group_members, pid_alive, spawn, stop_process

pytestmark = pytest.mark.stack

SHARED = Path(__file__).resolve().parents[1] / "shared"

RECORDER = '''
import json, os
import functions_framework

@functions_framework.cloud_event
def on_session_ended(event):
    """Append the CloudEvent (attributes and data) as one JSON line to $DEVSTACK_OUT."""
    record = {"attributes": dict(event.get_attributes()), "data": event.data}
    with open(os.environ["DEVSTACK_OUT"], "a", encoding="utf-8") as out:
        out.write(json.dumps(record) + "\\n")
'''

FAILING = '''
import os
import functions_framework

@functions_framework.cloud_event
def always_fails(event):
    """Count the attempt in $DEVSTACK_OUT, then fail (HTTP 500: a nack for push)."""
    with open(os.environ["DEVSTACK_OUT"], "a", encoding="utf-8") as out:
        out.write(event["id"] + "\\n")
    raise RuntimeError("this function always fails")
'''

RETRIEVAL = """
import functions_framework

@functions_framework.http
def get_context(request):
    return {"q": request.args.get("q", ""), "store": __import__("os").environ["MEMREPO_STORE"]}
"""


def _source(directory: Path, code: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "main.py").write_text(code, encoding="utf-8")
    return directory


def _wait_for_lines(path: Path, count: int, timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        if len(lines) >= count:
            return lines
        time.sleep(0.1)
    raise AssertionError(f"{path} has fewer than {count} lines after {timeout} s")


def _all_pids(processes: list[ManagedProcess]) -> set[int]:
    """Every live PID of the given servers' process groups (java, gunicorn workers ...)."""
    pids: set[int] = set()
    for proc in processes:
        pids |= group_members(proc.pid) | {proc.pid}
    return {p for p in pids if pid_alive(p)}


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Stack, Path]]:
    root = tmp_path_factory.mktemp("devstack")
    out = root / "received.jsonl"
    with Stack(
        project="devstack-test",
        bucket="devstack-bucket",
        prefix="users",
        writer=_source(root / "writer", RECORDER),
        retrieval=_source(root / "retrieval", RETRIEVAL),
        function_env={"DEVSTACK_OUT": str(out)},
        min_backoff_seconds=1,
        max_backoff_seconds=2,
        log_dir=root / "logs",
    ) as running:
        assert running.startup_seconds is not None and running.startup_seconds < 60
        yield running, out


def test_env_names_every_endpoint(stack: tuple[Stack, Path]) -> None:
    s, _ = stack
    env = s.env()
    assert env["PUBSUB_EMULATOR_HOST"] == s.pubsub_host
    assert env["PUBSUB_EMULATOR_HOST"].startswith("127.0.0.1:")
    assert env["STORAGE_EMULATOR_HOST"] == s.gcs_url
    assert env["STORAGE_EMULATOR_HOST"].startswith("http://127.0.0.1:")
    assert env["GOOGLE_CLOUD_PROJECT"] == env["PUBSUB_PROJECT_ID"] == "devstack-test"
    assert env["MEMREPO_STORE"] == "gs://devstack-bucket/users"
    assert env["MEMREPO_TOPIC"] == s.topic_path == "projects/devstack-test/topics/session-ended"
    assert env["MEMREPO_WRITER_URL"] == s.writer_url
    assert env["MEMREPO_RETRIEVAL_URL"] == s.retrieval_url
    assert s.dead_letter_subscription_path.startswith("projects/devstack-test/subscriptions/")


def test_push_delivers_a_pubsub_cloudevent_to_the_writer(stack: tuple[Stack, Path]) -> None:
    s, out = stack
    payload = b'{"session_id": "s-1", "user_id": "u-1"}'
    message_id = s.publish(payload, user_id="u-1", session_id="s-1")

    record = json.loads(_wait_for_lines(out, 1, timeout=30)[0])

    # The shape the writer receives through writer-push (functions-framework's conversion).
    attributes, data = record["attributes"], record["data"]
    assert attributes["type"] == "google.cloud.pubsub.topic.v1.messagePublished"
    assert attributes["source"] == f"//pubsub.googleapis.com/{s.topic_path}"
    assert attributes["id"] == message_id
    assert attributes["specversion"] == "1.0"
    assert set(data) == {"message"}
    message = data["message"]
    assert set(message) == {"@type", "data", "attributes", "messageId", "publishTime"}
    assert message["@type"] == "type.googleapis.com/google.pubsub.v1.PubsubMessage"
    assert base64.b64decode(message["data"]) == payload
    assert message["attributes"] == {"user_id": "u-1", "session_id": "s-1"}
    assert message["messageId"] == message_id
    assert attributes["time"] == message["publishTime"]


def test_retrieval_function_answers_http(stack: tuple[Stack, Path]) -> None:
    s, _ = stack
    with urllib.request.urlopen(f"{s.retrieval_url}/?q=hello", timeout=10) as resp:  # noqa: S310
        assert json.loads(resp.read()) == {"q": "hello", "store": "gs://devstack-bucket/users"}


def test_fake_gcs_enforces_generation_preconditions(
    stack: tuple[Stack, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.api_core.exceptions import PreconditionFailed
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    s, _ = stack
    bucket = s.storage_client().bucket(s.bucket)
    blob = bucket.blob("users/u-1.bundle")
    blob.upload_from_string(b"v1", if_generation_match=0)
    first = blob.generation
    assert first
    with pytest.raises(PreconditionFailed):
        bucket.blob(blob.name).upload_from_string(b"other", if_generation_match=0)

    second = bucket.blob(blob.name)
    second.upload_from_string(b"v2", if_generation_match=first)
    with pytest.raises(PreconditionFailed):
        bucket.blob(blob.name).upload_from_string(b"stale", if_generation_match=first)

    # A resumable (chunked) upload follows the Location URL back to the fake.
    big = bucket.blob("users/big.bundle", chunk_size=256 * 1024)
    big.upload_from_string(b"x" * (600 * 1024), if_generation_match=0)
    assert bucket.blob("users/big.bundle").download_as_bytes() == b"x" * (600 * 1024)

    # Versioning: the bucket reports it and keeps the overwritten generation readable.
    assert s.storage_client().get_bucket(s.bucket).versioning_enabled is True
    assert bucket.blob(blob.name, generation=first).download_as_bytes() == b"v1"

    # The same through STORAGE_EMULATOR_HOST, as a function or script would configure it.
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", s.gcs_url)
    client = storage.Client(project=s.project, credentials=AnonymousCredentials())
    assert client.bucket(s.bucket).blob(blob.name).download_as_bytes() == b"v2"


def test_failing_push_ends_in_the_dead_letter_subscription(
    stack: tuple[Stack, Path], tmp_path: Path
) -> None:
    s, _ = stack
    attempts = tmp_path / "attempts.txt"
    spec = FunctionSpec(
        target="always_fails",
        source=_source(tmp_path / "failing", FAILING),
        signature_type="cloudevent",
        env={"DEVSTACK_OUT": str(attempts)},
    )
    with FunctionServer(spec, log_path=tmp_path / "failing.log") as failing:
        s.create_push_subscription(
            "failing-push",
            failing.url,
            topic="failing",
            max_delivery_attempts=5,
            min_backoff_seconds=1,
            max_backoff_seconds=2,
        )
        began = time.monotonic()
        message_id = s.publish(
            b"cannot be written", topic_path=f"projects/{s.project}/topics/failing"
        )
        dead = s.pull_dead_letters(min_messages=1, timeout=60)
        elapsed = time.monotonic() - began

    assert len(dead) == 1, f"no dead letter after {elapsed:.0f} s"
    assert dead[0].data == b"cannot be written"
    assert dead[0].attributes["CloudPubSubDeadLetterSourceDeliveryCount"] == "5"
    assert dead[0].attributes["CloudPubSubDeadLetterSourceSubscription"] == "failing-push"
    assert attempts.read_text(encoding="utf-8").split() == [message_id] * 5


def test_stack_stops_every_process_when_the_body_raises(tmp_path: Path) -> None:
    retrieval = _source(tmp_path / "retrieval", RETRIEVAL)
    with pytest.raises(RuntimeError, match="boom"), Stack(retrieval=retrieval) as s:
        pids = _all_pids(s.processes)
        cmdlines = {p: Path(f"/proc/{p}/cmdline").read_bytes() for p in pids}
        assert any(b"java" in c for c in cmdlines.values()), "the emulator runs as java"
        assert any(b"fake-gcs-server" in c for c in cmdlines.values())
        assert sum(b"functions-framework" in c for c in cmdlines.values()) >= 2, "gunicorn worker"
        raise RuntimeError("boom")
    assert not [p for p in pids if pid_alive(p)]


def test_stop_by_record_kills_the_group_the_leader_left_behind(tmp_path: Path) -> None:
    proc = spawn("sleepers", ["sh", "-c", "sleep 300 & sleep 300 & wait"], log_path=None)
    deadline = time.monotonic() + 5
    while len(group_members(proc.pid)) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = group_members(proc.pid)
    assert len(members) == 3

    # A record with the wrong start time (a reused PID) is never signalled.
    assert proc.start_time is not None
    impostor = ManagedProcess.from_record({**proc.to_record(), "start_time": proc.start_time + 1})
    stop_process(impostor)
    assert all(pid_alive(p) for p in members)

    # The leader dies first; its children keep the group, and stopping by record reaches them.
    os.kill(proc.pid, signal.SIGKILL)
    assert proc.popen is not None
    proc.popen.wait(timeout=5)
    stop_process(ManagedProcess.from_record(proc.to_record()), timeout=5)
    assert not [p for p in members if pid_alive(p)]


def test_cli_up_then_down_by_state_file(tmp_path: Path) -> None:
    state_file = tmp_path / "stack.json"
    out = tmp_path / "up.out"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(SHARED), os.environ.get("PYTHONPATH", "")]),
    }
    with out.open("wb") as sink:
        up = subprocess.Popen(
            [sys.executable, "-m", "memrepo.devstack", "up", "--state-file", str(state_file)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 90
        while not state_file.exists():
            assert up.poll() is None, out.read_text()
            assert time.monotonic() < deadline, "no state file"
            time.sleep(0.2)
        state = json.loads(state_file.read_text())
        processes = [ManagedProcess.from_record(r) for r in state["processes"]]
        assert {p.name for p in processes} == {"pubsub-emulator", "fake-gcs-server"}
        pids = _all_pids(processes)
        with urllib.request.urlopen(f"http://{state['env']['PUBSUB_EMULATOR_HOST']}/") as resp:  # noqa: S310
            assert resp.read().strip() == b"Ok"
        assert (
            f"export PUBSUB_EMULATOR_HOST={state['env']['PUBSUB_EMULATOR_HOST']}" in out.read_text()
        )

        down = subprocess.run(
            [sys.executable, "-m", "memrepo.devstack", "down", "--state-file", str(state_file)],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert down.returncode == 0, down.stderr
        assert up.wait(timeout=30) == 0, out.read_text()
        assert not state_file.exists()
        assert not [p for p in pids if pid_alive(p)]
    finally:
        if up.poll() is None:
            up.send_signal(signal.SIGTERM)
            up.wait(timeout=30)
        if state_file.exists():  # `up` died without cleaning up: stop what it recorded
            for record in json.loads(state_file.read_text())["processes"]:
                stop_process(ManagedProcess.from_record(record))


def test_importing_devstack_imports_no_cloud_client() -> None:
    code = (
        "import sys, memrepo.devstack, memrepo.devstack.__main__\n"
        "prefixes = ('google.cloud.', 'google.api_core', 'grpc')\n"
        "print([m for m in sys.modules if m.startswith(prefixes)])"
    )
    env = {**os.environ, "PYTHONPATH": str(SHARED)}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
