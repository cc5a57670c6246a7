"""Writer overhead per session (everything but an LLM) against the naive way, in one run.

For each history size (sessions already in the user's repository) three writers apply the same
new sessions to their own copy of the same history, interleaved round by round:

* ``naive``: the layout before manifests — download the full bundle, clone it, commit, bundle
  the whole history again and upload it (``memory.bundle`` with a generation precondition);
* ``cold``: the manifest layout on a new instance (an empty cache): download base + increments;
* ``warm``: the manifest layout on a warm instance (its cache at the stored state, as after its
  previous write): read the manifest, lean private workspace, commit, upload one increment and
  the manifest.

Each write is the real :class:`~memrepo.writer.SessionWriter` with the deterministic engine (the
stand-in for the LLM); the engine's own time is measured and reported apart, so ``overhead``
is storage and git only. A compacting write (new base of the whole history) is measured
separately at the end: it happens once every ``chain_max_increments`` (64) writes.

Run::

    .venv/bin/python scripts/bench/writer_overhead.py --sizes 100 1000 10000 --store fs

The growth of the warm overhead with the history is also measured with the sizes interleaved
round by round (``--growth-rounds``), so that it is a ratio measured side by side.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import (
    fake_gcs,
    machine,
    scratch,
    seed_legacy,
    seed_manifest,
    summary,
    table,
    write_json,
)
from histories import events, history_bundle
from memrepo.events import SessionEnded
from memrepo.manifest import legacy_key
from memrepo.repocache import RepoCache
from memrepo.repos import UserRepos
from memrepo.store import FilesystemStore
from memrepo.store.base import BundleStore, StoredObject
from memrepo.workspace import Workspace
from memrepo.writer import DeterministicWriter, SessionWriter
from memrepo.writer.base import CommitPlan, WriterEngine

USER = "heavy"


class NaiveRepos:
    """The pre-manifest layout: one full bundle per user, rewritten whole by every save."""

    def __init__(self, store: BundleStore, tmp_root: Path) -> None:
        self.store = store
        self.tmp_root = tmp_root

    def checkout(self, user_id: str, **_: Any) -> tuple[Workspace, int]:
        stored = self.store.get(legacy_key(user_id))
        ws = Workspace.hydrate(stored.data if stored else None, user_id, tmp_root=self.tmp_root)
        return ws, stored.generation if stored else 0

    def checkout_existing(self, user_id: str, **_: Any) -> tuple[Workspace, int] | None:
        stored = self.store.get(legacy_key(user_id))
        if stored is None:
            return None
        ws = Workspace.hydrate(stored.data, user_id, tmp_root=self.tmp_root)
        return ws, stored.generation

    def save(self, ws: Workspace, generation: int) -> int:
        return self.store.put(legacy_key(ws.user_id), ws.bundle(), if_generation_match=generation)


class TimedEngine(WriterEngine):
    """The deterministic engine, timed (its time is not storage overhead)."""

    name = "deterministic"

    def __init__(self) -> None:
        self.inner = DeterministicWriter()
        self.spent = 0.0

    def prepare(self, ws: Workspace, event: SessionEnded) -> CommitPlan:
        began = time.perf_counter()
        try:
            return self.inner.prepare(ws, event)
        finally:
            self.spent += time.perf_counter() - began


class Counting(BundleStore):
    """Counts the bytes read from and written to the inner store."""

    def __init__(self, inner: BundleStore) -> None:
        self.inner, self.url = inner, inner.url
        self.read = self.written = 0

    def _get(self, key: str) -> StoredObject | None:
        got = self.inner.get(key)
        self.read += len(got.data) if got else 0
        return got

    def _put(self, key: str, data: bytes, if_generation_match: int) -> int:
        self.written += len(data)
        return self.inner.put(key, data, if_generation_match=if_generation_match)

    def _delete(self, key: str, all_versions: bool) -> int:
        return self.inner.delete(key, all_versions=all_versions)

    def _list(self, prefix: str) -> list[str]:
        return self.inner.list(prefix)


def timed_write(repos: Any, event: SessionEnded, store: Counting) -> dict[str, float]:
    engine = TimedEngine()
    writer = SessionWriter(repos, engine, sleep=lambda s: None)
    store.read = store.written = 0
    began = time.perf_counter()
    result = writer.write(event)
    total = time.perf_counter() - began
    assert result.status == "committed", result
    return {"total": total, "engine": engine.spent, "overhead": total - engine.spent,
            "read_bytes": store.read, "written_bytes": store.written}


def bench_size(size: int, args: argparse.Namespace, make_store: Any, work: Path) -> dict[str, Any]:
    bundle = history_bundle(USER, size).read_bytes()
    rounds = max(args.rounds, args.cold_rounds, args.naive_rounds)
    new = list(events(USER, size + rounds + 2))[size:]
    stores = {name: Counting(make_store(f"{name}-{size}")) for name in ("naive", "cold", "warm")}
    seed_legacy(stores["naive"].inner, USER, bundle)
    seed_manifest(stores["cold"].inner, USER, bundle)
    seed_manifest(stores["warm"].inner, USER, bundle)
    tmp = work / f"tmp-{size}"
    tmp.mkdir()
    warm_cache = RepoCache(work / f"cache-warm-{size}", 4 << 30)
    warm = UserRepos(stores["warm"], tmp_root=tmp, cache=warm_cache, max_increments=64)
    began = time.perf_counter()
    ws, _ = warm.checkout(USER, lean=True)  # the instance's first request: fills the cache
    ws.close()
    warmup_s = time.perf_counter() - began
    samples: dict[str, list[dict[str, float]]] = {"naive": [], "cold": [], "warm": []}
    for r in range(rounds):
        event = new[r]
        if r < args.naive_rounds:
            samples["naive"].append(timed_write(NaiveRepos(stores["naive"], tmp), event,
                                                stores["naive"]))
        if r < args.cold_rounds:
            cold_cache = RepoCache(work / f"cache-cold-{size}-{r}", 4 << 30)
            cold = UserRepos(stores["cold"], tmp_root=tmp, cache=cold_cache, max_increments=64)
            samples["cold"].append(timed_write(cold, event, stores["cold"]))
            cold_cache.close()
        if r < args.rounds:
            samples["warm"].append(timed_write(warm, event, stores["warm"]))
        print(f"  {size} sessions: round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    warm.max_increments = 1  # the next write compacts: a base of the whole history is uploaded
    compaction = timed_write(warm, new[rounds], stores["warm"])
    warm_cache.close()
    result: dict[str, Any] = {"size": size, "bundle_bytes": len(bundle),
                              "warm_cache_fill_s": round(warmup_s, 3)}
    for name, runs in samples.items():
        result[name] = {
            "total": summary([s["total"] for s in runs]),
            "overhead": summary([s["overhead"] for s in runs]),
            "engine": summary([s["engine"] for s in runs]),
            "read_bytes_median": statistics.median(s["read_bytes"] for s in runs),
            "written_bytes_median": statistics.median(s["written_bytes"] for s in runs),
        }
    result["warm_compaction"] = {k: round(v * 1000, 1) if k in ("total", "engine", "overhead")
                                 else v for k, v in compaction.items()}
    return result


def growth_phase(args: argparse.Namespace, make_store: Any, work: Path) -> dict[int, Any]:
    """Warm writes of every size interleaved round by round (order alternating): side by side.

    The per-size runs above happen one after the other, so a change in the machine's load between
    them skews a ratio across sizes; here every size writes in every round.
    """
    rounds = args.growth_rounds
    setups: dict[int, tuple[Counting, RepoCache, UserRepos, list[SessionEnded]]] = {}
    for size in args.sizes:
        store = Counting(make_store(f"growth-{size}"))
        seed_manifest(store.inner, USER, history_bundle(USER, size).read_bytes())
        tmp = work / f"tmp-growth-{size}"
        tmp.mkdir()
        cache = RepoCache(work / f"cache-growth-{size}", 4 << 30)
        repos = UserRepos(store, tmp_root=tmp, cache=cache, max_increments=64)
        ws, _ = repos.checkout(USER, lean=True)  # a warm instance: its cache filled
        ws.close()
        setups[size] = (store, cache, repos, list(events(USER, size + rounds))[size:])
    samples: dict[int, list[float]] = {size: [] for size in args.sizes}
    for r in range(rounds):
        for size in args.sizes if r % 2 == 0 else list(reversed(args.sizes)):
            store, _, repos, new = setups[size]
            samples[size].append(timed_write(repos, new[r], store)["overhead"])
        print(f"  growth: round {r + 1}/{rounds} done", file=sys.stderr, flush=True)
    for _, cache, _, _ in setups.values():
        cache.close()
    return {size: summary(values) for size, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--rounds", type=int, default=9, help="warm writes per size")
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--naive-rounds", type=int, default=3)
    parser.add_argument("--growth-rounds", type=int, default=15,
                        help="warm writes per size, sizes interleaved, for the growth ratio")
    parser.add_argument("--store", choices=["fs", "gcs"], default="fs")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    info = machine()
    results = []
    with scratch("memrepo-bench-writer-") as work:
        if args.store == "gcs":
            with fake_gcs() as (make, _server):
                for size in args.sizes:
                    results.append(bench_size(size, args, make, work))
                growth_runs = growth_phase(args, make, work)
        else:
            def make(prefix: str) -> BundleStore:
                return FilesystemStore(work / "stores" / prefix)

            for size in args.sizes:
                results.append(bench_size(size, args, make, work))
            growth_runs = growth_phase(args, make, work)
    info["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    rows = []
    for r in results:
        naive, cold, warm = r["naive"], r["cold"], r["warm"]
        rows.append([
            r["size"], f"{r['bundle_bytes'] / 1e6:.1f} MB",
            naive["overhead"]["median_ms"], cold["overhead"]["median_ms"],
            warm["overhead"]["median_ms"], warm["overhead"]["p95_ms"],
            warm["engine"]["median_ms"],
            f"{naive['overhead']['median_ms'] / warm['overhead']['median_ms']:.0f}x",
            f"{naive['total']['median_ms'] / warm['total']['median_ms']:.0f}x",
            r["warm_compaction"]["overhead"],
            f"{naive['written_bytes_median'] / 1e6:.2f} MB / "
            f"{warm['written_bytes_median'] / 1e3:.1f} kB",
        ])
    print(f"\nwriter overhead per session, store={args.store}, medians in ms "
          f"(naive n={args.naive_rounds}, cold n={args.cold_rounds}, warm n={args.rounds})\n")
    print(table(["sessions", "bundle", "naive", "cold", "warm", "warm p95", "engine",
                 "naive/warm", "incl. engine", "compaction", "uploaded naive / warm"], rows))
    first, last = results[0]["warm"]["overhead"], results[-1]["warm"]["overhead"]
    growth = last["median_ms"] / first["median_ms"]
    print(f"\nwarm overhead growth {results[0]['size']} -> {results[-1]['size']} sessions: "
          f"{growth:.2f}x (per-size runs, one after the other)")
    print(f"\nwarm overhead with the sizes interleaved, n={args.growth_rounds} each, in ms\n")
    low = growth_runs[args.sizes[0]]["median_ms"]
    print(table(["sessions", "p50", "p95", "vs smallest"],
                [[size, g["median_ms"], g["p95_ms"], f"{g['median_ms'] / low:.2f}x"]
                 for size, g in growth_runs.items()]))
    side_by_side = growth_runs[args.sizes[-1]]["median_ms"] / low
    print(f"\nwarm overhead growth {args.sizes[0]} -> {args.sizes[-1]} sessions, side by side: "
          f"{side_by_side:.2f}x")
    path = write_json(f"writer_overhead_{args.store}", {
        "machine": info, "results": results, "warm_growth": round(growth, 2),
        "growth_interleaved": {str(k): v for k, v in growth_runs.items()},
        "warm_growth_interleaved": round(side_by_side, 2)}, args.out)
    print(f"JSON: {path}")


if __name__ == "__main__":
    main()
