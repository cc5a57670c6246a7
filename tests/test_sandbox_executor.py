"""Running pipelines: chains, stderr, the output cap, the deadline, and no process left behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from memrepo.sandbox import Sandbox
from memrepo.sandbox.executor import NO_TMPDIR, Executor, stage_env
from memrepo.sandbox.policy import PlannedPipeline, Stage
from test_sandbox_support import (
    RecordingExecutor,
    build_memory_repo,
    live_processes_in_groups,
    run_in_shell,
    snapshot,
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = build_memory_repo(tmp_path_factory.mktemp("executor") / "ana")
    (root / "big.md").write_text("".join(f"line {i:05d}\n" for i in range(20_000)))
    return root


def _plan(*pipelines: tuple[str, list[tuple[str, ...]]]) -> list[PlannedPipeline]:
    return [
        PlannedPipeline(connector, tuple(Stage(argv, argv[0]) for argv in stages))  # type: ignore[arg-type]
        for connector, stages in pipelines
    ]


def _assert_all_gone(recorder: RecordingExecutor) -> None:
    for pid in recorder.pids:
        with pytest.raises(ChildProcessError):
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)
    assert live_processes_in_groups(recorder.pids) == []


@pytest.mark.parametrize(
    "command",
    [
        "ls nope && cat index.md",
        "ls nope || cat index.md",
        "ls nope; cat index.md",
        "cat index.md && ls nope || head -1 profile.md; wc -l profile.md",
        "grep -c x nope.md index.md",
        "git show HEAD:nope.md || git show HEAD:index.md",
        "cat big.md | sort -r | uniq | head -3",
        "git log --oneline | wc -l",
        "grep -rn Sam | sort",
    ],
)
def test_chains_and_errors_like_a_shell(repo: Path, command: str) -> None:
    recorder = RecordingExecutor()
    result = Sandbox(repo, executor=recorder).run(command)
    shell = run_in_shell(command, repo)
    # The same lines (a terminal interleaves standard error by time; see the next test).
    assert sorted(result.output.splitlines()) == sorted((shell.stdout + shell.stderr).splitlines())
    assert result.exit_code == shell.returncode
    _assert_all_gone(recorder)


def test_each_pipelines_errors_follow_its_output(repo: Path) -> None:
    result = Sandbox(repo).run("grep -c qqq nope.md index.md; ls nope; head -1 index.md")
    assert result.output == (
        "index.md:0\n"
        "grep: nope.md: No such file or directory\n"
        "ls: cannot access 'nope': No such file or directory\n"
        "# Index\n"
    )
    assert result.exit_code == 0


def test_skipped_pipelines_start_no_program(repo: Path) -> None:
    recorder = RecordingExecutor()
    Sandbox(repo, executor=recorder).run("ls nope && cat index.md && cat profile.md || wc x")
    assert [argv[0] for argv in recorder.argvs] == ["ls", "wc"]


def test_output_is_capped_and_marked(repo: Path) -> None:
    recorder = RecordingExecutor()
    result = Sandbox(repo, max_output_bytes=1_000, executor=recorder).run("cat big.md; ls")
    assert result.truncated and not result.timed_out
    assert result.output == (repo / "big.md").read_text()[:1_000] + (
        "\n[output truncated at 1000 bytes]\n"
    )
    assert [argv[0] for argv in recorder.argvs] == ["cat"]  # the chain stops at the cap
    _assert_all_gone(recorder)


def test_output_exactly_at_the_cap_is_not_truncated(repo: Path) -> None:
    size = len((repo / "index.md").read_bytes())
    result = Sandbox(repo, max_output_bytes=size).run("cat index.md")
    assert not result.truncated and result.output == (repo / "index.md").read_text()


def test_cap_counts_all_pipelines_together(repo: Path) -> None:
    size = len((repo / "index.md").read_bytes())
    result = Sandbox(repo, max_output_bytes=size + 5).run("cat index.md; cat index.md")
    assert result.truncated
    assert result.output.startswith((repo / "index.md").read_text() + "# Ind\n[output truncated")


def test_stderr_counts_toward_the_cap(repo: Path) -> None:
    result = Sandbox(repo, max_output_bytes=10).run("cat nope.md")
    assert result.truncated and result.output.startswith("cat: nope.")


def test_undecodable_bytes_are_replaced(repo: Path, tmp_path: Path) -> None:
    (repo / "latin1.md").write_bytes(b"caf\xe9\n")
    try:
        assert Sandbox(repo).run("cat latin1.md").output == "caf\ufffd\n"
    finally:
        (repo / "latin1.md").unlink()


# --- the executor alone, with programs the policy would never allow --------------------------


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    recorder = RecordingExecutor()
    plan = _plan((";", [("sh", "-c", "sleep 30 & sleep 30; echo never")]))
    start = time.monotonic()
    outcome = recorder.run(plan, cwd=tmp_path, timeout_s=0.5, max_output_bytes=1_000)
    assert time.monotonic() - start < 2.0
    assert outcome.timed_out and outcome.exit_code == 124 and outcome.output == b""
    _assert_all_gone(recorder)  # the backgrounded grandchild too


def test_a_program_that_closes_its_output_still_meets_the_deadline(tmp_path: Path) -> None:
    recorder = RecordingExecutor()
    plan = _plan((";", [("sh", "-c", "exec >&- 2>&-; sleep 30")]))
    outcome = recorder.run(plan, cwd=tmp_path, timeout_s=0.5, max_output_bytes=1_000)
    assert outcome.timed_out
    _assert_all_gone(recorder)


def test_endless_output_is_cut_at_the_cap(tmp_path: Path) -> None:
    recorder = RecordingExecutor()
    plan = _plan((";", [("yes",)]), (";", [("echo", "not reached")]))
    outcome = recorder.run(plan, cwd=tmp_path, timeout_s=5, max_output_bytes=10_000)
    assert outcome.truncated and not outcome.timed_out
    assert outcome.output == b"y\n" * 5_000
    assert len(recorder.argvs) == 1
    _assert_all_gone(recorder)


def test_endless_producer_stops_when_the_reader_exits(tmp_path: Path) -> None:
    recorder = RecordingExecutor()
    plan = _plan((";", [("yes",), ("head", "-2")]))
    outcome = recorder.run(plan, cwd=tmp_path, timeout_s=5, max_output_bytes=10_000)
    assert outcome == type(outcome)(b"y\ny\n", False, False, 0)
    _assert_all_gone(recorder)


def test_first_stage_reads_dev_null_and_env_is_empty(tmp_path: Path) -> None:
    plan = _plan((";", [("sh", "-c", "cat; env | sort")]))
    outcome = Executor().run(plan, cwd=tmp_path, timeout_s=5, max_output_bytes=10_000)
    lines = outcome.output.decode().splitlines()
    assert {line.split("=", 1)[0] for line in lines} <= {"PATH", "LC_ALL", "TMPDIR", "PWD"}
    assert "LC_ALL=C.UTF-8" in lines and f"TMPDIR={NO_TMPDIR}" in lines


def test_git_gets_the_hardened_env_and_path_has_only_absolute_entries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", ".::/usr/bin:bin:/bin")
    monkeypatch.setenv("SECRET_TOKEN", "x")
    env = stage_env(Stage(("git", "log"), "git"))
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["GIT_CONFIG_NOSYSTEM"] == "1" and "SECRET_TOKEN" not in env
    assert stage_env(Stage(("cat",), "cat"))["PATH"] == "/usr/bin:/bin"


def test_memory_limit_applies_to_programs_but_git(tmp_path: Path) -> None:
    plan = _plan((";", [("sh", "-c", "sleep 0.3; ulimit -v")]))
    outcome = Executor(memory_limit_bytes=256 << 20).run(
        plan, cwd=tmp_path, timeout_s=5, max_output_bytes=100
    )
    assert outcome.output == b"262144\n"


def test_a_missing_program_reports_127(tmp_path: Path) -> None:
    recorder = RecordingExecutor()
    plan = _plan((";", [("yes",), ("no-such-program-xyz",)]), ("||", [("echo", "fallback")]))
    outcome = recorder.run(plan, cwd=tmp_path, timeout_s=5, max_output_bytes=1_000)
    assert outcome.output.startswith(b"no-such-program-xyz: cannot start")
    assert outcome.output.endswith(b"fallback\n") and outcome.exit_code == 0
    _assert_all_gone(recorder)


def test_killed_by_a_signal_reports_128_plus_n(tmp_path: Path) -> None:
    plan = _plan((";", [("sh", "-c", "kill -TERM $$")]))
    outcome = Executor().run(plan, cwd=tmp_path, timeout_s=5, max_output_bytes=100)
    assert outcome.exit_code == 128 + 15


def test_nothing_is_written_by_allowed_commands(repo: Path) -> None:
    before = snapshot(repo)
    sandbox = Sandbox(repo)
    for command in (
        "git diff",
        "git diff --stat HEAD~2",
        "git log -p -3",
        "git grep -n Sam",
        "git ls-files",
        "git blame index.md",
        "git shortlog -sn HEAD",
        "sort -r big.md | head -1",
    ):
        assert not sandbox.run(command).refused
    assert snapshot(repo) == before


def test_sandbox_validates_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Sandbox(tmp_path, timeout_s=0)
    with pytest.raises(ValueError):
        Sandbox(tmp_path, max_output_bytes=0)
    with pytest.raises(ValueError):
        Sandbox(tmp_path / "missing")
