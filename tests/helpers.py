"""Small builders shared by tests: events, Pub/Sub envelopes, repository reads."""

from __future__ import annotations

import base64
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memrepo.gitcli import git_text
from memrepo.repos import UserRepos

DATA = Path(
    os.environ.get("MEMREPO_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)
LOCOMO = DATA / "locomo" / "locomo-dev.json"


def event(
    user_id: str = "ana",
    session_id: str = "s1",
    *,
    occurred_at: str = "2024-05-01T09:30:00+02:00",
    turns: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """Return a valid session-end event dict (override any field)."""
    return {
        "user_id": user_id,
        "session_id": session_id,
        "occurred_at": occurred_at,
        "turns": turns
        if turns is not None
        else [
            {
                "speaker": "Ana",
                "role": "user",
                "content": "My sister Sarah starts at the bakery on Monday.",
            },
            {"speaker": "Bot", "role": "assistant", "content": "Congratulations to Sarah!"},
        ],
        **extra,
    }


def envelope(
    payload: Any, *, raw: bytes | None = None, attributes: Any = "absent", **message: Any
) -> dict[str, Any]:
    """Return Pub/Sub CloudEvent data (push shape) carrying ``payload`` as JSON (or ``raw``)."""
    data = raw if raw is not None else json.dumps(payload).encode()
    msg: dict[str, Any] = {"data": base64.b64encode(data).decode(), "messageId": "1", **message}
    if attributes != "absent":
        msg["attributes"] = attributes
    return {"message": msg, "subscription": "projects/p/subscriptions/s"}


def commits(repos: UserRepos, user_id: str) -> list[str]:
    """Return the Session-Id trailers of the user's commits, newest first ([] without memory)."""
    if repos.store.get(repos.key(user_id)) is None:
        return []
    ws, _ = repos.checkout(user_id)
    with ws:
        out = git_text(
            ["log", "--format=%(trailers:key=Session-Id,valueonly)%x1e", ws.branch], ws.path
        )
    return [r.strip() for r in out.split("\x1e") if r.strip()]


@contextmanager
def running_stack(**kwargs: Any) -> Iterator[Any]:
    """Run a :class:`memrepo.devstack.stack.Stack` with its env exported to this process.

    The Google client libraries read the emulator hosts from ``os.environ``; the previous
    environment is restored afterwards.
    """
    from memrepo.devstack.stack import Stack

    saved = dict(os.environ)
    with Stack(**kwargs) as running:
        os.environ.update(running.env())
        try:
            yield running
        finally:
            os.environ.clear()
            os.environ.update(saved)


def gcs_repos(stack: Any) -> UserRepos:
    """Return :class:`UserRepos` on the stack's bucket on fake-gcs-server."""
    from memrepo.adapters.gcs import GCSStore

    return UserRepos(GCSStore(stack.bucket, stack.prefix, client=stack.storage_client()))


def wait_for(predicate: Callable[[], Any], timeout: float = 120.0, interval: float = 0.3) -> Any:
    """Poll ``predicate`` every ``interval`` seconds until it is truthy; return its value.

    Raises:
        AssertionError: it stayed falsy for ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout} s")
