"""Synthetic user histories for the benchmarks, built fast with ``git fast-import``.

Each session is a realistic :class:`~memrepo.events.SessionEnded` (a dozen turns naming a few
people from a fixed pool) run through the real :class:`~memrepo.writer.DeterministicWriter` in
memory, so the files (transcripts, monthly timelines, people files, profile, index) and the
commit trailers look exactly like the writer's. The commits are streamed into
``git fast-import`` (git-fast-import(1)), which writes one pack directly: 10,000 sessions take
about a minute instead of hours of real writes. Histories are cached as bundles under
``$MEMREPO_BENCH_DIR`` (default ``/tmp/memrepo-bench``).
"""

from __future__ import annotations

import os
import random
import subprocess
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from memrepo.events import SessionEnded, parse_session_ended
from memrepo.gitcli import git, git_argv, hardened_env
from memrepo.writer import DeterministicWriter

BENCH_DIR = Path(os.environ.get("MEMREPO_BENCH_DIR", "/tmp/memrepo-bench"))  # noqa: S108
FORMAT = 2  # bump when the generated content changes, to invalidate cached histories

PEOPLE = """Sarah Tom Maria Jonas Priya Kenji Amara Lucas Olga Diego Fatima Noah Elena Marco
Aisha Pavel Chloe Omar Ingrid Rafael Yuki Hannah Tariq Sofia Mateo Leila Anders Nadia Felix Zara
Bruno Keiko Ivan Lena Samir Greta Hugo Mira Caleb Rosa Emeka Alma Viktor Nora Julian Selin Pedro
Tamsin Arjun Freya""".split()
PLACES = """bakery gym office park library studio garden market beach cafe station museum
clinic school harbour hospital theatre stadium""".split()
TOPICS = """painting guitar marathon recipes budget vacation promotion adoption pottery chess
cycling novel podcast surgery wedding renovation camping volunteering photography startup exam
interview garden puppy kayak concert""".split()
RELATIONS = "friend sister brother colleague cousin neighbor boss partner".split()


class _MemoryWorkspace:
    """The two reads the deterministic writer does (``read``, ``files``), over a dict."""

    def __init__(self, files: dict[str, str]) -> None:
        self._files = files

    def read(self, relpath: str) -> str | None:
        return self._files.get(relpath)

    def files(self, prefix: str = "") -> list[str]:
        return sorted(p for p in self._files if p.startswith(prefix))


def synthetic_event(user_id: str, n: int, when: datetime, rng: random.Random) -> SessionEnded:
    """Return session number ``n`` of a synthetic user: 12 turns, 1-3 people, ~2 KB of text."""
    people = rng.sample(PEOPLE, rng.randint(1, 3))
    turns = []
    for t in range(12):
        who = people[t % len(people)]
        place, topic, other = rng.choice(PLACES), rng.choice(TOPICS), rng.choice(TOPICS)
        if t % 2 == 0:
            text = (
                f"Yesterday my {rng.choice(RELATIONS)} {who} and I went to the {place} to talk "
                f"about {topic}. {who} thinks the {other} plan could work by spring, number {n}."
            )
            turns.append({"speaker": "Ana", "role": "user", "content": text})
        else:
            text = (
                f"That sounds lovely. How is {who} feeling about the {topic} now, and did the "
                f"{place} visit help with the {other}?"
            )
            turns.append({"speaker": "Bot", "role": "assistant", "content": text})
    return parse_session_ended({
        "user_id": user_id,
        "session_id": f"s{n:06d}",
        "occurred_at": when.isoformat(),
        "turns": turns,
    })


def events(user_id: str, count: int, seed: int = 0) -> Iterator[SessionEnded]:
    """Yield ``count`` sessions of ``user_id``, about nine a day from 2021-01-01 on."""
    rng = random.Random(seed)  # noqa: S311 - benchmark data, not security
    when = datetime(2021, 1, 1, 8, 0, tzinfo=UTC)
    for n in range(count):
        when += timedelta(minutes=rng.randint(60, 260))
        yield synthetic_event(user_id, n, when, rng)


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def _stream(user_id: str, count: int, seed: int) -> Iterator[bytes]:
    engine = DeterministicWriter()
    files: dict[str, str] = {}
    ref = f"refs/heads/user/{user_id}"
    for mark, event in enumerate(events(user_id, count, seed), start=1):
        plan = engine.prepare(_MemoryWorkspace(files), event)  # type: ignore[arg-type]
        files.update(plan.files)
        stamp = int(event.occurred_at.timestamp())
        trailers = {
            "Session-Id": event.session_id,
            "Session-Digest": event.digest(),
            "Occurred-At": event.occurred_at.isoformat(),
            "Writer": plan.writer,
        }
        message = plan.message + "\n\n" + "\n".join(f"{k}: {v}" for k, v in trailers.items()) + "\n"
        out = [f"commit {ref}\nmark :{mark}\n".encode()]
        out.append(f"author memrepo <memrepo@localhost> {stamp} +0000\n".encode())
        out.append(f"committer memrepo <memrepo@localhost> {stamp} +0000\n".encode())
        out.append(_data(message))
        if mark > 1:
            out.append(f"from :{mark - 1}\n".encode())
        for path, text in sorted(plan.files.items()):
            out.append(f"M 100644 inline {path}\n".encode() + _data(text))
        out.append(b"\n")
        yield b"".join(out)


def build_repo(path: Path, user_id: str, count: int, seed: int = 0) -> Path:
    """Create a repository at ``path`` holding ``count`` sessions on ``user/<user_id>``.

    Returns:
        ``path``. Raises GitError or CalledProcessError when git fails.
    """
    path.mkdir(parents=True, exist_ok=True)
    git(["init", "-q", "--bare", f"--initial-branch=user/{user_id}", "."], path)
    proc = subprocess.Popen(
        git_argv(["fast-import", "--quiet", "--done"]), cwd=path, env=hardened_env(),
        stdin=subprocess.PIPE,
    )
    assert proc.stdin is not None
    for chunk in _stream(user_id, count, seed):
        proc.stdin.write(chunk)
    proc.stdin.write(b"done\n")
    proc.stdin.close()
    if proc.wait() != 0:
        raise subprocess.CalledProcessError(proc.returncode, "git fast-import")
    git(["repack", "-a", "-d", "-f", "-q"], path, timeout=3600)  # real deltas, as a writer makes
    return path


def history_bundle(user_id: str, count: int, seed: int = 0) -> Path:
    """Return a cached full bundle of ``count`` sessions of ``user_id`` (built on first use)."""
    target = BENCH_DIR / "histories" / f"v{FORMAT}-{user_id}-{count}-{seed}.bundle"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = target.with_suffix(".git")
    subprocess.run(["rm", "-rf", str(work)], check=True)
    build_repo(work, user_id, count, seed)
    tmp = target.with_suffix(".tmp")
    git(["bundle", "create", "-q", str(tmp), f"refs/heads/user/{user_id}"], work)
    tmp.rename(target)
    subprocess.run(["rm", "-rf", str(work)], check=True)
    return target
