#!/usr/bin/env python3
"""End-to-end smoke test of a deployed memrepo: publish one session, then ask for a context.

1. Publishes one ``SessionEnded`` event (JSON) to the session topic with google-cloud-pubsub.
2. Polls the retrieval function with ``POST {user_id, conversation, max_tokens}`` until the
   returned ``context`` mentions the session (its id or a marker word only that session holds),
   or the timeout passes.

Topic and URL default to the Terraform outputs of ``infra/`` (``session_topic_id``,
``retrieval_url``), so after ``scripts/deploy`` it runs with no arguments::

    python3 scripts/smoke_test.py
    python3 scripts/smoke_test.py --topic projects/P/topics/memrepo-session-ended \\
        --url https://memrepo-retrieval-xyz-ew.a.run.app --timeout 600

Credentials: Application Default Credentials publish the event (``roles/pubsub.publisher`` on the
topic). The retrieval call carries a Google-signed ID token for the function's URL (the caller
must be one of ``retrieval_invoker_members``): from ``google.oauth2.id_token.fetch_id_token``
(a service account key or the metadata server), else from ``gcloud auth print-identity-token``
(a user login), else ``--id-token``. When the deployment requires the bearer token, set
``MEMREPO_AUTH_TOKEN``: it goes in ``Authorization`` and the ID token moves to
``X-Serverless-Authorization``, which Cloud Run checks instead.

Needs ``google-cloud-pubsub`` and ``google-auth`` (both come with the project's dependencies).
Exit status: 0 when the context mentions the session, 1 on timeout, 2 on a usage or
authorization error.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

INFRA_DIR = Path(__file__).resolve().parent.parent / "infra"


class SmokeError(Exception):
    """The smoke test cannot go on (the message says why and what to do)."""


def terraform_outputs(infra_dir: Path) -> dict[str, Any]:
    """Return ``terraform output -json`` of ``infra_dir`` as ``{name: value}``."""
    try:
        done = subprocess.run(
            ["terraform", f"-chdir={infra_dir}", "output", "-json"],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SmokeError(
            f"could not read the Terraform outputs of {infra_dir} ({exc}); pass --topic and --url"
        ) from exc
    return {name: item.get("value") for name, item in json.loads(done.stdout or "{}").items()}


def make_event(user_id: str, session_id: str, marker: str) -> dict[str, Any]:
    """Return a SessionEnded event whose transcript names ``marker`` (a word no other has)."""
    return {
        "user_id": user_id,
        "session_id": session_id,
        "occurred_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "turns": [
            {
                "speaker": "Smoke Tester",
                "role": "user",
                "content": (
                    f"Hi! My new project is called {marker}. I work on {marker} with my "
                    "colleague Ada Lovelace every Tuesday."
                ),
            },
            {
                "speaker": "Assistant",
                "role": "assistant",
                "content": f"Noted: {marker} is your new project, with Ada on Tuesdays.",
            },
        ],
        "metadata": {"channel": "smoke-test"},
    }


def publish(topic: str, event: dict[str, Any], timeout: float) -> str:
    """Publish ``event`` as JSON to ``topic`` (``projects/P/topics/T``); return the message id."""
    from google.cloud import pubsub_v1  # imported here: --help works without the package

    publisher = pubsub_v1.PublisherClient()
    data = json.dumps(event, ensure_ascii=False).encode("utf-8")
    # No ordering key: the session topic does not enable message ordering.
    future = publisher.publish(topic, data, source="smoke-test")
    return str(future.result(timeout=timeout))


def id_token_for(audience: str) -> str:
    """Return a Google-signed ID token for ``audience`` (see the module docstring)."""
    import google.auth.exceptions
    import google.auth.transport.requests
    import google.oauth2.id_token

    try:
        token = google.oauth2.id_token.fetch_id_token(
            google.auth.transport.requests.Request(), audience
        )
        return str(token)
    except (google.auth.exceptions.GoogleAuthError, ValueError):
        pass  # user credentials cannot mint ID tokens for an audience: ask gcloud instead
    try:
        done = subprocess.run(
            ["gcloud", "auth", "print-identity-token"],
            check=True,
            capture_output=True,
            text=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise SmokeError(
            "no ID token: set GOOGLE_APPLICATION_CREDENTIALS to a service account key, log in "
            "with `gcloud auth login`, or pass --id-token"
        ) from exc
    return done.stdout.strip()


def ask_context(
    url: str,
    body: dict[str, Any],
    id_token: str,
    auth_token: str | None,
    timeout: float,
) -> tuple[int, dict[str, Any] | str]:
    """POST ``body`` to the retrieval URL; return the status and the decoded JSON (or text)."""
    if not url.startswith("https://"):
        raise SmokeError(f"retrieval URL {url!r} is not https")
    headers = {"Content-Type": "application/json"}
    if auth_token:
        headers["Authorization"] = f"Bearer {auth_token}"
        headers["X-Serverless-Authorization"] = f"Bearer {id_token}"
    else:
        headers["Authorization"] = f"Bearer {id_token}"
    request = urllib.request.Request(  # noqa: S310 - https only, checked above
        url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    text = raw.decode("utf-8", "replace")
    try:
        return status, json.loads(text)
    except json.JSONDecodeError:
        return status, text


def run(args: argparse.Namespace) -> int:
    outputs: dict[str, Any] = {}
    if not args.topic or not args.url:
        outputs = terraform_outputs(args.infra_dir)
    topic = args.topic or outputs.get("session_topic_id")
    url = (args.url or outputs.get("retrieval_url") or "").rstrip("/")
    if not topic or not url:
        raise SmokeError("no topic or retrieval URL: pass --topic and --url")

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    suffix = secrets.token_hex(3)
    user_id = args.user_id or f"smoke-{stamp}-{suffix}"
    session_id = f"smoke-{stamp}-{suffix}"
    marker = f"Zephyrine{suffix}"
    event = make_event(user_id, session_id, marker)

    message_id = publish(topic, event, timeout=60)
    print(f"published session {session_id} of user {user_id} to {topic} (message {message_id})")

    auth_token = os.environ.get("MEMREPO_AUTH_TOKEN") or None
    token = args.id_token or id_token_for(url)
    body = {
        "user_id": user_id,
        "conversation": [
            {"role": "user", "content": f"What do you remember about {marker} and Ada?"}
        ],
        "max_tokens": args.max_tokens,
    }

    deadline = time.monotonic() + args.timeout
    last: tuple[int, dict[str, Any] | str] | None = None
    while True:
        status, answer = ask_context(url, body, token, auth_token, timeout=60)
        last = (status, answer)
        if status in (401, 403):
            raise SmokeError(
                f"retrieval answered {status}: is this identity in retrieval_invoker_members"
                " (and MEMREPO_AUTH_TOKEN set when the bearer token is enabled)? "
                f"{str(answer)[:300]}"
            )
        if status == 200 and isinstance(answer, dict):
            context = str(answer.get("context", ""))
            if session_id in context or marker in context:
                print(
                    f"ok: context mentions the session (engine={answer.get('engine')}, "
                    f"tokens_used={answer.get('tokens_used')}, "
                    f"elapsed_ms={answer.get('elapsed_ms')})"
                )
                return 0
        if time.monotonic() + args.interval > deadline:
            break
        print(f"  not yet (HTTP {status}); retrying in {args.interval:g} s")
        time.sleep(args.interval)

    print(f"FAILED: no context mentioned {session_id} within {args.timeout:g} s", file=sys.stderr)
    print(f"last answer: HTTP {last[0]}: {json.dumps(last[1])[:2000]}", file=sys.stderr)
    print(
        "check the writer's logs and the dead-letter subscription (infra/README.md)",
        file=sys.stderr,
    )
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Publish one session to a deployed memrepo and wait until retrieval sees it."
    )
    parser.add_argument("--topic", help="session topic id projects/P/topics/T (default: Terraform)")
    parser.add_argument("--url", help="retrieval function URL (default: Terraform output)")
    parser.add_argument("--infra-dir", type=Path, default=INFRA_DIR, help="Terraform root module")
    parser.add_argument("--user-id", help="user id to write as (default: a fresh smoke-... id)")
    parser.add_argument("--id-token", help="ID token to call retrieval with (default: fetched)")
    parser.add_argument("--max-tokens", type=int, default=2000, help="context budget")
    parser.add_argument("--timeout", type=float, default=300, help="seconds to wait in all")
    parser.add_argument("--interval", type=float, default=10, help="seconds between polls")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except SmokeError as exc:
        print(f"smoke_test: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
