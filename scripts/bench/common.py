"""Shared pieces of the benchmarks: machine facts, statistics, tables, JSON, stores, seeding.

Every benchmark runs its variants side by side in one process and one run (interleaved round by
round, so load changes on a shared machine hit all of them alike) and reports medians over
several runs. Scratch space is on tmpfs (``/dev/shm``) when available, like Cloud Functions'
in-memory ``/tmp``.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
RESULTS = HERE / "results"
sys.path[:0] = [str(ROOT / "shared"), str(HERE)]

from memrepo.chain import bundle_header  # noqa: E402
from memrepo.manifest import Manifest, Part, legacy_key, manifest_key, part_key  # noqa: E402
from memrepo.store.base import BundleStore  # noqa: E402


def machine() -> dict[str, Any]:
    """Return what the figures depend on: CPUs, memory, load, Python and git versions."""
    free = subprocess.run(["free", "-h"], capture_output=True, text=True).stdout.strip()
    git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
    return {
        "nproc": os.cpu_count(),
        "free_h": free,
        "loadavg_start": Path("/proc/loadavg").read_text().split()[:3],
        "python": platform.python_version(),
        "git": git,
        "platform": platform.platform(),
        "scratch": str(scratch_root()),
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def scratch_root() -> Path:
    """Return a tmpfs directory when there is one (``/dev/shm``), else the system temp dir."""
    shm = Path("/dev/shm")  # noqa: S108
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """Yield a fresh directory under :func:`scratch_root`, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix=prefix, dir=scratch_root()))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def summary(values_s: Sequence[float]) -> dict[str, float]:
    """Return n, median, p95, min and max of durations given in seconds, in milliseconds."""
    ms = sorted(v * 1000 for v in values_s)
    if not ms:
        return {"n": 0}
    p95 = ms[min(len(ms) - 1, max(0, round(0.95 * (len(ms) - 1))))]
    return {"n": len(ms), "median_ms": round(statistics.median(ms), 1), "p95_ms": round(p95, 1),
            "min_ms": round(ms[0], 1), "max_ms": round(ms[-1], 1)}


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Return a Markdown table."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = ["| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"
            for r in cells]
    return "\n".join([line, rule, *body])


def write_json(name: str, payload: dict[str, Any], out: Path | None = None) -> Path:
    """Write ``payload`` as JSON to ``out`` or ``scripts/bench/results/<name>.json``."""
    path = out or RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n")
    return path


def seed_manifest(store: BundleStore, user_id: str, bundle: bytes) -> Manifest:
    """Store ``bundle`` (a full bundle of ``user/<user_id>``) as the user's base and manifest."""
    refs, _ = bundle_header(bundle)
    tip = refs[f"refs/heads/user/{user_id}"]
    base = Part.of(part_key(user_id, "base", bundle, int(time.time() * 1000)), tip, bundle)
    store.put(base.key, bundle, if_generation_match=0)
    manifest = Manifest(user_id, base)
    store.put(manifest_key(user_id), manifest.to_bytes(), if_generation_match=0)
    return manifest


def seed_legacy(store: BundleStore, user_id: str, bundle: bytes) -> None:
    """Store ``bundle`` as the user's single ``memory.bundle`` (the naive layout)."""
    store.put(legacy_key(user_id), bundle, if_generation_match=0)


@contextmanager
def fake_gcs() -> Iterator[Any]:
    """Yield a ``(make_store(prefix), server)`` pair backed by a fresh fake-gcs-server."""
    from memrepo.adapters.gcs import GCSStore
    from memrepo.devstack.gcs_emulator import FakeGcsServer, storage_client

    with FakeGcsServer() as server:
        client = storage_client(server.url)
        client.create_bucket("bench")

        def make(prefix: str) -> BundleStore:
            return GCSStore("bench", prefix, client=client)

        yield make, server
