"""The main job end to end, on a fresh machine: local stack → LoCoMo replay over Pub/Sub → contexts.

Starts the Pub/Sub emulator, fake-gcs-server and both functions on 127.0.0.1, replays one LoCoMo
conversation (``../shared/data/locomo/locomo-dev.json``, or the project's own sample in
``samples/`` where that file is absent) through Pub/Sub, one session-end event per session, waits
for every commit, answers three of its questions through the retrieval function, prints the
contexts and the user's git log summary, and stops everything by PID (also on Ctrl-C or failure).

Usage: ``scripts/demo [--conversation conv-26] [--user caroline] [--questions 3]
[--max-tokens 600]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from memrepo import locomo
from memrepo.devstack.stack import Stack

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "locomo" / "locomo-dev.json"
SAMPLE = ROOT / "samples" / "locomo-sample.json"


def ask(url: str, user: str, question: str, max_tokens: int) -> dict:
    body = json.dumps(
        {
            "user_id": user,
            "conversation": [{"role": "user", "content": question}],
            "max_tokens": max_tokens,
        }
    ).encode()
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - 127.0.0.1
        return json.loads(response.read())


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=SHARED if SHARED.exists() else SAMPLE)
    parser.add_argument("--conversation", default=None, help="sample_id (default: the first)")
    parser.add_argument("--user", default="demo-user")
    parser.add_argument("--questions", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=600)
    args = parser.parse_args()

    items = locomo.load(args.data)
    item = next((i for i in items if i["sample_id"] == args.conversation), items[0])
    conv = locomo.conversation(item, args.user)
    print(f"data: {args.data}\nconversation {item['sample_id']}: {len(conv.events)} sessions")

    with Stack(
        writer=ROOT / "functions" / "writer", retrieval=ROOT / "functions" / "retrieval"
    ) as stack:
        print(
            f"local stack up in {stack.startup_seconds:.1f} s: Pub/Sub {stack.pubsub_host}, "
            f"GCS {stack.gcs_url}, writer {stack.writer_url}, retrieval {stack.retrieval_url}"
        )
        env = {**os.environ, **stack.env()}
        cli = [sys.executable, "-m", "memrepo.cli"]
        subprocess.run(
            [
                *cli,
                "ingest",
                "--locomo",
                str(args.data),
                "--conversation",
                item["sample_id"],
                "--user",
                args.user,
                "--via",
                "pubsub",
            ],
            env=env,
            check=True,
        )
        log = subprocess.run(
            [*cli, "log", args.user], env=env, check=True, capture_output=True, text=True
        )
        print(
            f"memrepo log {args.user}: {log.stdout.count('Session-Id:')} commits "
            "with a Session-Id trailer"
        )
        questions = [q for q in conv.questions if q.category in (1, 2, 4)][: args.questions]
        for q in questions:
            answer = ask(stack.retrieval_url or "", args.user, q.question, args.max_tokens)
            found = sum(conv.turns.get(e, "\0") in answer["context"] for e in q.evidence)
            print("\n" + "=" * 100)
            print(f"Q: {q.question}\nexpected answer: {q.answer}")
            print(
                f"context: {answer['tokens_used']} tokens, {len(answer['blocks'])} blocks, engine "
                f"{answer['engine']}, {answer['elapsed_ms']:.0f} ms, evidence turns found "
                f"{found}/{len(q.evidence)}"
            )
            print("-" * 100)
            print(answer["context"])
    print("\nlocal stack stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
