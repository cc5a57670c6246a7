"""The operations CLI: a rebuild survives a real kill and resumes; the other commands' JSON."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import LOCOMO, event
from memrepo import locomo
from memrepo.cli import app
from memrepo.events import parse_session_ended
from memrepo.gitcli import git_text
from memrepo.operations.rebuild import checkpoint_key
from memrepo.repos import UserRepos
from memrepo.store import FilesystemStore
from memrepo.writer import DeterministicWriter, SessionWriter
from typer.testing import CliRunner


def cli_env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "MEMREPO_MIRROR_URL")}
    return {**env, "MEMREPO_STORE": store.as_uri(), "MEMREPO_ENGINE": "deterministic"}


def branch_state(repos: UserRepos, user: str) -> tuple[str, str]:
    ws, _ = repos.checkout(user)
    with ws:
        tip, tree = git_text(["rev-parse", "HEAD", "HEAD^{tree}"], ws.path).split()
    return tip, tree


@pytest.mark.skipif(not LOCOMO.exists(), reason=f"{LOCOMO} not present")
def test_a_killed_rebuild_resumes_and_gives_the_same_files(tmp_path):
    store_dir = tmp_path / "store"
    repos = UserRepos(FilesystemStore(store_dir))
    item = next(i for i in locomo.load(LOCOMO) if i["sample_id"] == "conv-26")
    writer = SessionWriter(repos, DeterministicWriter())
    for e in locomo.conversation(item, "caroline").events:
        writer.write(e)
    old_tip, old_tree = branch_state(repos, "caroline")

    argv = [sys.executable, "-m", "memrepo.cli", "rebuild", "caroline", "--json",
            "--checkpoint-every", "1"]
    proc = subprocess.Popen(argv, env=cli_env(store_dir), stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    killed_at = None
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            step = json.loads(line).get("progress") or {}
            if step.get("checkpointed") and step["done"] >= 6:
                killed_at = step["done"]
                os.killpg(proc.pid, signal.SIGKILL)  # the process group we started: rebuild + git
                break
    finally:
        proc.wait(timeout=60)
    assert killed_at is not None and proc.returncode == -signal.SIGKILL
    assert branch_state(repos, "caroline") == (old_tip, old_tree)  # the live memory is untouched
    assert repos.store.get(checkpoint_key("caroline")) is not None

    done = subprocess.run(argv, env=cli_env(store_dir), capture_output=True, text=True,
                          timeout=300, check=True)
    result = json.loads(done.stdout.splitlines()[-1])["result"]
    assert killed_at <= result["resumed_from"] < 19 and result["sessions"] == 19
    assert result["replaced"] == old_tip
    new_tip, new_tree = branch_state(repos, "caroline")
    assert new_tree == old_tree and new_tip == result["commit"]
    assert repos.store.get(checkpoint_key("caroline")) is None


def test_the_commands_print_json(tmp_path, monkeypatch):
    store_dir = tmp_path / "store"
    for key, value in cli_env(store_dir).items():
        monkeypatch.setenv(key, value)
    run = CliRunner().invoke

    out = run(app, ["onboard", "ana", "--profile", "Nurse in Porto.\nLoves sailing.", "--name",
                    "Ana", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["status"] == "onboarded"
    assert json.loads(run(app, ["onboard", "ana", "--profile", "x", "--json"]).output)[
        "status"] == "exists"

    writer = SessionWriter(UserRepos(FilesystemStore(store_dir)), DeterministicWriter())
    for n, who in enumerate(("Sarah", "Tom", "Lea"), start=1):
        writer.write(parse_session_ended(event(
            session_id=f"s{n}", occurred_at=f"2024-05-0{n}T09:00:00+00:00",
            turns=[{"speaker": "Ana", "role": "user", "content": f"My friend {who} called."}])))

    files = json.loads(run(app, ["show", "ana", "--json"]).output)["files"]
    assert "memories/people/tom.md" in files and "profile.md" in files
    shown = json.loads(run(app, ["show", "ana", "profile.md", "--json"]).output)
    assert "- profile: Loves sailing." in shown["text"]
    blamed = [json.loads(x) for x in run(app, ["blame", "ana", "timeline/2024-05.md",
                                                "--json"]).output.splitlines()]
    assert {b["session_id"] for b in blamed} == {"s1", "s2", "s3"}

    reverted = json.loads(run(app, ["revert", "ana", "s2", "--json"]).output)
    assert reverted["status"] == "reverted"
    assert "D\tmemories/people/tom.md" in reverted["changed"]
    missing = run(app, ["revert", "ana", "nope"])
    assert missing.exit_code == 2 and "no commit of session nope" in missing.output

    bundle = tmp_path / "ana.bundle"
    assert run(app, ["export", "ana", str(bundle)]).exit_code == 0
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "-b", "user/ana", str(bundle), str(clone)], check=True)
    assert not (clone / "memories/people/tom.md").exists()

    assert run(app, ["delete", "ana"]).exit_code == 2  # needs --yes
    deleted = json.loads(run(app, ["delete", "ana", "--yes", "--json"]).output)
    assert deleted["deleted_objects"] >= 1
    assert run(app, ["show", "ana"]).exit_code == 2
