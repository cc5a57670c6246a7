"""Installed size of the runtime dependencies in a clean virtual environment.

Creates a venv with this interpreter, installs ``[project].dependencies`` of ``pyproject.toml``
(what ``scripts/package_functions.py`` puts in each function's ``requirements.txt``) with pip as
configured on this machine, and sums the files each installed distribution records (its
``RECORD``). Then serves one request of each function in that venv (in process, through
``functions_framework.create_app(...).test_client()``) and maps the modules it loaded to their
distributions, to show which of the bytes a function actually uses.

Run::

    .venv/bin/python scripts/bench/installed_size.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

from common import ROOT, machine, scratch, table, write_json

SIZES = r'''
import json, importlib.metadata as md
out = {}
for dist in md.distributions():
    files = dist.files or []
    size = 0
    for f in files:
        try:
            size += f.locate().stat().st_size
        except OSError:
            pass
    out[dist.metadata["Name"]] = {"version": dist.version, "bytes": size}
print(json.dumps(out))
'''

LOADED = r'''
import base64, json, os, sys, importlib.metadata as md
from functions_framework import create_app
target, kind = sys.argv[1], sys.argv[2]
app = create_app(target, "main.py", kind)
client = app.test_client()
if kind == "http":
    client.post("/", json={"user_id": "nobody", "max_tokens": 100,
                           "conversation": [{"role": "user", "content": "hi"}]})
else:
    session = {"user_id": "ana", "session_id": "s1", "occurred_at": "2024-05-01T09:30:00+00:00",
               "turns": [{"speaker": "Ana", "role": "user", "content": "My sister Sarah bakes."}]}
    data = base64.b64encode(json.dumps(session).encode()).decode()
    client.post("/", json={"message": {"data": data, "messageId": "1",
                                       "publishTime": "2024-05-01T09:30:01Z"},
                           "subscription": "s"},
                headers={"ce-id": "1", "ce-specversion": "1.0",
                         "ce-type": "google.cloud.pubsub.topic.v1.messagePublished",
                         "ce-source": "//pubsub.googleapis.com/projects/p/topics/t"})
tops = {m.split(".")[0] for m in sys.modules}
owners = md.packages_distributions()
print(json.dumps(sorted({d for t in tops for d in owners.get(t, [])})))
'''


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    info = machine()
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    with scratch("memrepo-bench-size-") as work:
        venv = work / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        python = venv / "bin" / "python"
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", *deps], check=True)
        sizes: dict[str, Any] = json.loads(subprocess.run(
            [str(python), "-c", SIZES], capture_output=True, text=True, check=True).stdout)
        used: dict[str, list[str]] = {}
        env = {"PATH": "/usr/bin:/bin", "HOME": str(work), "PYTHONPATH": str(ROOT / "shared"),
               "MEMREPO_STORE": (work / "store").as_uri(), "MEMREPO_CACHE_DIR": str(work / "c")}
        for name, target, kind in (("writer", "on_session_ended", "cloudevent"),
                                   ("retrieval", "get_context", "http")):
            out = subprocess.run([str(python), "-c", LOADED, target, kind],
                                 cwd=ROOT / "functions" / name, env=env, capture_output=True,
                                 text=True, check=True).stdout
            used[name] = json.loads(out.strip().splitlines()[-1])
    tooling = {"pip", "setuptools", "wheel"}
    runtime = {k: v for k, v in sizes.items() if k not in tooling}
    total = sum(v["bytes"] for v in runtime.values())
    rows = []
    for name, item in sorted(runtime.items(), key=lambda kv: -kv[1]["bytes"]):
        rows.append([name, item["version"], f"{item['bytes'] / 1e6:.1f}",
                     "yes" if name in used["writer"] else "",
                     "yes" if name in used["retrieval"] else ""])
    per_function = {f: sum(v["bytes"] for k, v in runtime.items() if k in used[f]) for f in used}
    print(f"\ninstalled runtime dependencies ({len(deps)} requirements, {len(runtime)} "
          f"distributions): {total / 1e6:.1f} MB\n")
    print(table(["distribution", "version", "MB", "writer loads", "retrieval loads"], rows))
    for name, size in per_function.items():
        print(f"\n{name}: the distributions it loads for a request total {size / 1e6:.1f} MB")
    path = write_json("installed_size", {"machine": info, "requirements": deps,
                                          "distributions": runtime, "total_bytes": total,
                                          "loaded_by": used, "loaded_bytes": per_function},
                      args.out)
    print(f"JSON: {path}", file=sys.stderr)


if __name__ == "__main__":
    main()
