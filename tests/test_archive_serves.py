"""The function archives, unpacked into a fresh venv with only their requirements.txt, serve both
functions under functions-framework: what Cloud Functions' build does, offline but for PyPI."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import urllib.request
import venv
import zipfile
from pathlib import Path

import pytest
from helpers import event
from memrepo.devstack.functions import FunctionServer, FunctionSpec

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.stack


def _post(url: str, body: dict) -> tuple[int, dict]:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 - 127.0.0.1
        text = response.read()
        is_json = response.headers.get_content_type() == "application/json"
        return response.status, json.loads(text) if is_json else {"text": text.decode()}


def test_archives_serve_from_a_fresh_venv(tmp_path: Path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "package_functions.py"), "--out", str(dist)],
        check=True,
        capture_output=True,
    )
    sources = {}
    for name in ("writer", "retrieval"):
        target = tmp_path / name
        with zipfile.ZipFile(dist / f"{name}.zip") as archive:
            archive.extractall(target)
        sources[name] = target
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    subprocess.run(
        [
            str(env_dir / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "--quiet",
            "-r",
            str(sources["writer"] / "requirements.txt"),
        ],
        check=True,
    )
    store = (tmp_path / "store").as_uri()
    env = {"MEMREPO_STORE": store, "PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    specs = {
        "writer": FunctionSpec(
            "on_session_ended", sources["writer"] / "main.py", "cloudevent", env
        ),
        "retrieval": FunctionSpec("get_context", sources["retrieval"] / "main.py", "http", env),
    }
    servers = [
        FunctionServer(
            spec,
            name=name,
            inherit_env=False,
            add_package_path=False,
            executable=env_dir / "bin" / "functions-framework",
            log_path=tmp_path / f"{name}.log",
        )
        for name, spec in specs.items()
    ]
    try:
        for server in servers:
            server.start()
        writer, retrieval = servers
        payload = base64.b64encode(json.dumps(event()).encode()).decode()
        status, _ = _post(
            writer.url + "/projects/p/topics/session-ended",
            {"message": {"data": payload, "messageId": "1"}, "subscription": "s"},
        )
        assert status == 200
        status, body = _post(
            retrieval.url,
            {
                "user_id": "ana",
                "max_tokens": 300,
                "conversation": [{"role": "user", "content": "Sarah bakery?"}],
            },
        )
        assert status == 200 and "Sarah starts at the bakery" in body["context"]
    finally:
        for server in servers:
            server.stop()
