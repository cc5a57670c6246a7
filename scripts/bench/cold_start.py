"""Cold start of each function under functions-framework, against minimal functions, in one run.

Each round starts, one after the other, ``functions-framework`` serving:

* ``hello-http``: a minimal HTTP function (returns ``ok``), the floor for retrieval;
* ``retrieval``: ``functions/retrieval/main.py`` answering a context request for a user without
  memory (the function's own start-up: imports, settings, store, handler, one ``git init``);
* ``retrieval-100``: the same function asked about a user with 100 sessions of memory (a new
  instance: download and check out the repository, load the tokenizer, plan, resolve);
* ``hello-event``: a minimal CloudEvent function (returns), the floor for the writer;
* ``writer``: ``functions/writer/main.py`` given an event it acknowledges without writing (not
  JSON): imports, settings, the writer built, the handler;
* ``writer-new-user``: the same function writing a new user's first session (git commit, a base
  bundle and the manifest stored).

Measured: wall time from ``Popen`` to the first HTTP 200 (the request is retried every 5 ms
until the port answers), and memory after that response: PSS (proportional set size, from
``/proc/<pid>/smaps_rollup``) summed over gunicorn's master and worker, so pages they share are
counted once, and the largest RSS among them. Medians over the rounds. Also the import time of
each ``main.py`` (``python -X importtime``), to show where a cold start goes.

Run::

    .venv/bin/python scripts/bench/cold_start.py --rounds 7
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from common import ROOT, machine, scratch, seed_manifest, table, write_json
from histories import history_bundle
from memrepo.store import FilesystemStore

HELLO_HTTP = '''import functions_framework


@functions_framework.http
def hello(request):
    return "ok"
'''
HELLO_EVENT = '''import functions_framework


@functions_framework.cloud_event
def hello(cloud_event):
    return None
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def event_request(url: str, user: str, *, poison: bool = False) -> urllib.request.Request:
    session = {"user_id": user, "session_id": "first", "occurred_at": "2024-05-01T09:30:00+00:00",
               "turns": [{"speaker": "Ana", "role": "user",
                          "content": "My sister Sarah starts at the bakery on Monday."}]}
    data = b"not json" if poison else json.dumps(session).encode()
    body = {"message": {"data": base64.b64encode(data).decode(),
                        "messageId": "1", "publishTime": "2024-05-01T09:30:01Z"},
            "subscription": "projects/p/subscriptions/s"}
    headers = {"Content-Type": "application/json", "ce-id": "1", "ce-specversion": "1.0",
               "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
               "ce-source": "//pubsub.googleapis.com/projects/p/topics/t"}
    return urllib.request.Request(url, data=json.dumps(body).encode(), headers=headers,
                                  method="POST")


def context_request(url: str, user: str) -> urllib.request.Request:
    body = {"user_id": user, "max_tokens": 2000,
            "conversation": [{"role": "user", "content": "How is Sarah doing with the marathon?"}]}
    return urllib.request.Request(url, data=json.dumps(body).encode(),
                                  headers={"Content-Type": "application/json"}, method="POST")


def memory(pid: int) -> dict[str, float]:
    """PSS summed over ``pid`` and its children, and the largest RSS, in MB."""
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    pss = rss = 0.0
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    pss += int(line.split()[1]) / 1024
                elif line.startswith("Rss:"):
                    rss = max(rss, int(line.split()[1]) / 1024)
        except FileNotFoundError:
            continue
    return {"pss_mb": round(pss, 1), "max_rss_mb": round(rss, 1), "processes": len(pids)}


def cold_start(source: Path, target: str, kind: str, env: dict[str, str],
               request: Any) -> dict[str, float]:
    port = free_port()
    argv = [str(Path(sys.executable).parent / "functions-framework"), "--target", target,
            "--source", str(source), "--signature-type", kind, "--host", "127.0.0.1",
            "--port", str(port)]
    began = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=source.parent, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{source} exited with {proc.returncode}")
            try:
                with urllib.request.urlopen(request(url), timeout=60) as response:  # noqa: S310
                    if response.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError):
                time.sleep(0.005)
        elapsed = time.perf_counter() - began
        return {"first_200_s": elapsed, **memory(proc.pid)}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def import_ms(source: Path, env: dict[str, str]) -> dict[str, Any]:
    """Median wall time of ``import main`` in a fresh interpreter, and what it imports directly.

    The breakdown is the cumulative microseconds ``python -X importtime`` reports for each module
    ``main`` imports itself (depth 1), from the last of three runs.
    """
    times = []
    direct: dict[str, float] = {}
    for _ in range(3):
        code = "import time; t = time.perf_counter(); import main; print(time.perf_counter() - t)"
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=source.parent,
                             env=env, capture_output=True, text=True, check=True)
        times.append(float(out.stdout.strip()))
        direct = {}
        for line in out.stderr.splitlines():
            fields = line.split("|", 2)
            if len(fields) != 3 or not fields[1].strip().isdigit():
                continue
            raw = fields[2]
            depth = (len(raw) - len(raw.lstrip()) - 1) // 2
            if depth == 1:
                direct[raw.strip()] = round(int(fields[1]) / 1000, 1)
    return {"import_ms": round(statistics.median(times) * 1000, 1), "imports_ms": direct}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    info = machine()
    with scratch("memrepo-bench-cold-") as work:
        for name, text in (("hello_http", HELLO_HTTP), ("hello_event", HELLO_EVENT)):
            (work / name).mkdir()
            (work / name / "main.py").write_text(text)
        store = FilesystemStore(work / "store")
        seed_manifest(store, "heavy", history_bundle("heavy", 100).read_bytes())
        base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(work),
                    "PYTHONPATH": str(ROOT / "shared"), "THREADS": "8",
                    "MEMREPO_STORE": store.url, "MEMREPO_TMP_DIR": str(work),
                    "MEMREPO_CACHE_DIR": str(work / "cache")}
        functions = {
            "hello-http": (work / "hello_http" / "main.py", "hello", "http", None),
            "retrieval": (ROOT / "functions" / "retrieval" / "main.py", "get_context", "http",
                          lambda url, n: context_request(url, "nobody")),
            "retrieval-100": (ROOT / "functions" / "retrieval" / "main.py", "get_context", "http",
                              lambda url, n: context_request(url, "heavy")),
            "hello-event": (work / "hello_event" / "main.py", "hello", "cloudevent", None),
            "writer": (ROOT / "functions" / "writer" / "main.py", "on_session_ended",
                       "cloudevent", lambda url, n: event_request(url, f"x{n}", poison=True)),
            "writer-new-user": (ROOT / "functions" / "writer" / "main.py", "on_session_ended",
                                "cloudevent", lambda url, n: event_request(url, f"new{n}")),
        }
        samples: dict[str, list[dict[str, float]]] = {name: [] for name in functions}
        for n in range(args.rounds):
            for name, (source, target, kind, make) in functions.items():
                if make is None:
                    if kind == "http":
                        def request(url: str) -> urllib.request.Request:
                            return urllib.request.Request(url)
                    else:
                        def request(url: str) -> urllib.request.Request:
                            return event_request(url, "nobody")
                else:
                    def request(url: str, make: Any = make, n: int = n) -> urllib.request.Request:
                        return make(url, n)  # type: ignore[no-any-return]
                samples[name].append(cold_start(source, target, kind, base_env, request))
            print(f"  round {n + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        imports = {name: import_ms(source, base_env)
                   for name, (source, _, _, _) in functions.items()}
    info["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    results: dict[str, Any] = {}
    for name, runs in samples.items():
        results[name] = {
            "first_200_ms_median": round(
                statistics.median(r["first_200_s"] for r in runs) * 1000, 1),
            "first_200_ms_all": [round(r["first_200_s"] * 1000, 1) for r in runs],
            "pss_mb_median": statistics.median(r["pss_mb"] for r in runs),
            "max_rss_mb_median": statistics.median(r["max_rss_mb"] for r in runs),
            **imports[name],
        }
    rows = []
    for name, floor in (("hello-http", "hello-http"), ("retrieval", "hello-http"),
                        ("retrieval-100", "hello-http"), ("hello-event", "hello-event"),
                        ("writer", "hello-event"), ("writer-new-user", "hello-event")):
        r, f = results[name], results[floor]
        rows.append([name, r["first_200_ms_median"],
                     f"{r['first_200_ms_median'] / f['first_200_ms_median']:.2f}x",
                     r["pss_mb_median"], f"{r['pss_mb_median'] / f['pss_mb_median']:.2f}x",
                     r["max_rss_mb_median"], r["import_ms"]])
    print(f"\ncold start under functions-framework, medians of {args.rounds} rounds\n")
    print(table(["function", "first 200 ms", "vs minimal", "PSS MB", "vs minimal",
                 "max RSS MB", "import main ms"], rows))
    path = write_json("cold_start", {"machine": info, "results": results}, args.out)
    print(f"JSON: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
