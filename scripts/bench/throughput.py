"""Writer throughput: sessions per second for 100 users x 10 sessions, with 1, 2 and 4 threads.

One instance (one :class:`~memrepo.repocache.RepoCache`, as a Cloud Functions instance with
request concurrency) writes every session with the real :class:`~memrepo.writer.SessionWriter`
and the deterministic engine; sessions arrive round-robin over users (each user's k-th session
after every user's (k-1)-th), taken from a shared queue by the worker threads. Each thread count
starts from an empty store. Reported: wall time, sessions per second, latency p50/p95 per
session, conflicts retried, and a check that every session landed exactly once.

Run::

    .venv/bin/python scripts/bench/throughput.py --users 100 --sessions 10 --threads 1 2 4
"""

from __future__ import annotations

import argparse
import queue
import sys
import threading
import time
from pathlib import Path
from typing import Any

from common import machine, scratch, summary, table, write_json
from histories import events
from memrepo.repocache import RepoCache
from memrepo.repos import UserRepos
from memrepo.store import FilesystemStore
from memrepo.writer import DeterministicWriter, SessionWriter


def run(threads: int, users: int, per_user: int, work: Path) -> dict[str, Any]:
    store = FilesystemStore(work / f"store-{threads}")
    cache = RepoCache(work / f"cache-{threads}", 1 << 30)
    repos = UserRepos(store, tmp_root=work, cache=cache)
    writer = SessionWriter(repos, DeterministicWriter())
    streams = [list(events(f"u{u:03d}", per_user, seed=u)) for u in range(users)]
    todo: queue.Queue[Any] = queue.Queue()
    for k in range(per_user):
        for u in range(users):
            todo.put(streams[u][k])
    latencies: list[float] = []
    attempts: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def worker() -> None:
        while True:
            try:
                event = todo.get_nowait()
            except queue.Empty:
                return
            began = time.perf_counter()
            try:
                result = writer.write(event)
            except BaseException as exc:  # noqa: BLE001 - reported
                with lock:
                    errors.append(exc)
                continue
            with lock:
                latencies.append(time.perf_counter() - began)
                attempts.append(result.attempts)

    began = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    wall = time.perf_counter() - began
    check = UserRepos(store)
    landed = 0
    for u in range(users):
        manifest, _ = check.read_manifest(f"u{u:03d}")
        ws, _ = check.checkout(f"u{u:03d}", read_only=True)
        with ws:
            landed += len(ws.files("sessions/"))
        assert manifest is not None
    cache.close()
    return {"threads": threads, "sessions": users * per_user, "wall_s": round(wall, 2),
            "sessions_per_s": round(users * per_user / wall, 2), "latency": summary(latencies),
            "retried_attempts": sum(a - 1 for a in attempts), "errors": [repr(e) for e in errors],
            "landed": landed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--users", type=int, default=100)
    parser.add_argument("--sessions", type=int, default=10)
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    info = machine()
    results = []
    with scratch("memrepo-bench-throughput-") as work:
        for threads in args.threads:
            results.append(run(threads, args.users, args.sessions, work))
            print(f"  {threads} threads done", file=sys.stderr, flush=True)
    info["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    rows = [[r["threads"], r["sessions"], r["wall_s"], r["sessions_per_s"],
             f"{r['sessions_per_s'] / results[0]['sessions_per_s']:.2f}x",
             r["latency"]["median_ms"], r["latency"]["p95_ms"], r["retried_attempts"],
             f"{r['landed']}/{r['sessions']}", len(r["errors"])] for r in results]
    print(f"\nwriter throughput, {args.users} users x {args.sessions} sessions, one instance\n")
    print(table(["threads", "sessions", "wall s", "sessions/s", "vs 1 thread", "p50 ms",
                 "p95 ms", "retries", "landed", "errors"], rows))
    path = write_json("throughput", {"machine": info, "results": results}, args.out)
    print(f"JSON: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
