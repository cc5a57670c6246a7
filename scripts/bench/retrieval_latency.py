"""Deterministic retrieval latency, p50/p95, cold and warm, at several history sizes, in one run.

For each size the same questions (about people, places and topics of the synthetic history) are
asked of :class:`~memrepo.retrieval.service.Retriever` with the deterministic engine:

* ``warm``: a warm instance — its cache holds the user's repository and a checkout at the stored
  state (the manifest is still read from the store on every request);
* ``warm+1``: a warm instance right after another instance stored one more session (fetch one
  increment, move the shared checkout forward);
* ``cold``: a new instance (empty cache): download base + increments, build the checkout;
* ``naive``: the layout before manifests — download and clone the full bundle on every request.

Where the time goes is reported from the retriever's own ``timings_ms`` (``hydrate`` = store and
git up to a ready checkout, ``plan`` = the deterministic engine, ``resolve`` = reading the pointed
sections under the token budget).

Run::

    .venv/bin/python scripts/bench/retrieval_latency.py --sizes 1000 10000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

from common import machine, scratch, seed_legacy, seed_manifest, summary, table, write_json
from histories import PEOPLE, PLACES, TOPICS, events, history_bundle
from memrepo import tokens
from memrepo.repocache import RepoCache
from memrepo.repos import UserRepos
from memrepo.retrieval.service import Retriever
from memrepo.store import FilesystemStore
from memrepo.writer import DeterministicWriter, SessionWriter
from writer_overhead import NaiveRepos

USER = "heavy"


def questions(count: int, seed: int = 7) -> list[list[dict[str, str]]]:
    rng = random.Random(seed)  # noqa: S311 - benchmark data
    shapes = [
        "How is {p} doing with the {t}?",
        "What did {p} say about the {pl} last time?",
        "Remind me what we discussed about {t} and {t2}.",
        "When did I last see {p} at the {pl}?",
    ]
    return [[{"role": "user", "content": rng.choice(shapes).format(
        p=rng.choice(PEOPLE), t=rng.choice(TOPICS), t2=rng.choice(TOPICS), pl=rng.choice(PLACES))}]
        for _ in range(count)]


def ask(retriever: Retriever, conversation: list[dict[str, str]]) -> dict[str, float]:
    began = time.perf_counter()
    result = retriever.context(USER, conversation, 2000)
    total = time.perf_counter() - began
    assert result.engine == "deterministic" and result.tokens_used > 0, result.metadata
    t = result.metadata["timings_ms"]
    return {"total": total, "hydrate": t.get("hydrate_ms", 0) / 1000,
            "plan": t.get("plan_ms", 0) / 1000, "resolve": t.get("resolve_ms", 0) / 1000}


def bench_size(size: int, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    bundle = history_bundle(USER, size).read_bytes()
    asked = questions(args.queries)
    stores = {"manifest": FilesystemStore(work / f"store-{size}"),
              "naive": FilesystemStore(work / f"naive-{size}")}
    seed_manifest(stores["manifest"], USER, bundle)
    seed_legacy(stores["naive"], USER, bundle)
    tmp = work / f"tmp-{size}"
    tmp.mkdir()
    cache = RepoCache(work / f"cache-{size}", 4 << 30)
    warm = Retriever(UserRepos(stores["manifest"], tmp_root=tmp, cache=cache))
    naive = Retriever(NaiveRepos(stores["naive"], tmp))  # type: ignore[arg-type]
    other = SessionWriter(UserRepos(stores["manifest"], tmp_root=tmp), DeterministicWriter(),
                          sleep=lambda s: None)
    fresh_sessions = list(events(USER, size + args.cold_rounds + 1))[size:]
    began = time.perf_counter()
    ask(warm, asked[0])  # the instance's first request fills its cache
    fill_s = time.perf_counter() - began
    samples: dict[str, list[dict[str, float]]] = {"warm": [], "warm+1": [], "cold": [], "naive": []}
    for i, conversation in enumerate(asked):
        samples["warm"].append(ask(warm, conversation))
        if i < args.cold_rounds:
            cold_cache = RepoCache(work / f"cold-{size}-{i}", 4 << 30)
            samples["cold"].append(ask(Retriever(UserRepos(stores["manifest"], tmp_root=tmp,
                                                            cache=cold_cache)), conversation))
            cold_cache.close()
            samples["naive"].append(ask(naive, conversation))
            other.write(fresh_sessions[i])  # another instance stores a session ...
            samples["warm+1"].append(ask(warm, conversation))  # ... which this one picks up
    cache.close()
    result: dict[str, Any] = {"size": size, "bundle_bytes": len(bundle), "cache_fill_s": fill_s}
    for name, runs in samples.items():
        result[name] = {part: summary([s[part] for s in runs])
                        for part in ("total", "hydrate", "plan", "resolve")}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument("--queries", type=int, default=40, help="warm requests per size")
    parser.add_argument("--cold-rounds", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    info = machine()
    tokens.encoding()  # the tokenizer loads once per process; not part of any request here
    with scratch("memrepo-bench-retrieval-") as work:
        results = [bench_size(size, args, work) for size in args.sizes]
    info["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    rows = []
    for r in results:
        for name in ("warm", "warm+1", "cold", "naive"):
            s = r[name]
            rows.append([r["size"], name, s["total"]["n"], s["total"]["median_ms"],
                         s["total"]["p95_ms"], s["hydrate"]["median_ms"], s["plan"]["median_ms"],
                         s["resolve"]["median_ms"]])
    print("\ndeterministic retrieval latency in ms (2,000-token budget)\n")
    print(table(["sessions", "instance", "n", "p50", "p95", "hydrate p50", "plan p50",
                 "resolve p50"], rows))
    path = write_json("retrieval_latency", {"machine": info, "results": results}, args.out)
    print(f"JSON: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
