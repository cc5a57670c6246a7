"""Every line of ``cases/run-tool.md``: refused, bounded, or the same output as a real shell."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from memrepo.errors import PermanentError
from memrepo.gitcli import git
from memrepo.sandbox import RunResult, Sandbox, SandboxRefusal
from test_sandbox_support import (
    RecordingExecutor,
    build_long_history_repo,
    build_memory_repo,
    live_processes_in_groups,
    pwned_files,
    run_in_shell,
    snapshot,
)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One repository for the module: every test that uses it asserts it stays unchanged."""
    return build_memory_repo(tmp_path_factory.mktemp("cases") / "users" / "ana")


@pytest.fixture
def recorder() -> RecordingExecutor:
    return RecordingExecutor()


def _run_refused(repo: Path, recorder: RecordingExecutor, command: str) -> RunResult:
    """Run a command that must be refused; assert nothing ran and nothing was written."""
    before = snapshot(repo)
    sandbox = Sandbox(repo, executor=recorder)
    with pytest.raises(SandboxRefusal) as info:
        sandbox.check(command)
    result = sandbox.run(command)
    assert result.refused and result.reason == info.value.reason
    assert result.output == f"refused: {result.reason}"
    assert result.exit_code == 126 and not result.truncated and not result.timed_out
    assert recorder.argvs == []
    assert snapshot(repo) == before
    assert pwned_files(repo.parent.parent) == []
    return result


# (command, a fragment the reason must contain)
READING_OUTSIDE = [
    ("cat ../other-user/profile.md", "outside the repository"),
    ("head -5 /etc/hostname", "absolute path"),
    ("grep -r token /proc/self/", "absolute path"),
    ("cat notes.md", "resolves outside the repository"),
    ("git diff --no-index /dev/null /etc/hostname", "--no-index"),
    ("git --git-dir=/tmp/x/.git log", "--git-dir"),
    ("git -C / log", "-C"),
    ("grep -f /proc/self/environ -r .", "pattern files"),
]
RUNNING_OTHER_PROGRAMS = [
    ("grep -n x $(cat profile.md)", "command substitution"),
    ("grep -n x `cat profile.md`", "command substitution"),
    ("git log -1\ntouch pwned", "`touch` is not allowed"),
    ("grep x <(cat /etc/passwd)", "process substitution"),
    ("git -c core.fsmonitor='touch pwned' status", "config overrides"),
    ("git -c alias.x='!touch pwned' x", "config overrides"),
    ("git grep --open-files-in-pager='touch pwned' Alice", "pager"),
    ("env GIT_EXTERNAL_DIFF='touch pwned' git diff HEAD~1", "`env` is not allowed"),
    ("find . -exec touch pwned \\;", "`find` is not allowed"),
    ("awk 'BEGIN{system(\"touch pwned\")}'", "`awk` is not allowed"),
    ("sed -n '1e touch pwned' profile.md", "`sed` is not allowed"),
    ("ls | xargs touch", "`xargs` is not allowed"),
]
WRITING = [
    ("git log -1 > profile.md", "redirections"),
    ("git log -1 >> index.md", "redirections"),
    ("git log | tee copy.md", "`tee` is not allowed"),
    ("git log --output=.git/hooks/post-commit", "writes a file"),
    ("sed -i 's/a/b/' profile.md", "`sed` is not allowed"),
    ("git stash", "`git stash` is not allowed"),
    ("git gc", "`git gc` is not allowed"),
    ("git branch -D user/x", "`git branch` is not allowed"),
    ("git config user.name x", "`git config` is not allowed"),
]
UNBOUNDED_REFUSED = [
    ("yes", "`yes` is not allowed"),
    ("cat /dev/zero", "absolute path"),
    ("tail -f timeline/2024-01.md", "never ends"),
]


@pytest.mark.parametrize(
    ("command", "fragment"),
    READING_OUTSIDE + RUNNING_OTHER_PROGRAMS + WRITING + UNBOUNDED_REFUSED,
    ids=lambda value: value.replace("\n", "\\n") if isinstance(value, str) else None,
)
def test_hostile_command_is_refused_and_nothing_runs(
    repo: Path, recorder: RecordingExecutor, command: str, fragment: str
) -> None:
    result = _run_refused(repo, recorder, command)
    assert result.reason is not None and fragment in result.reason


def test_refusal_is_a_permanent_memrepo_error(repo: Path) -> None:
    with pytest.raises(PermanentError):
        Sandbox(repo).check("touch pwned")


def test_public_api() -> None:
    import memrepo.sandbox as api

    assert sorted(api.__all__) == ["RunResult", "Sandbox", "SandboxRefusal"]
    assert all(hasattr(api, name) for name in api.__all__)
    assert RunResult.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_overlong_command_is_refused(repo: Path, recorder: RecordingExecutor) -> None:
    result = _run_refused(repo, recorder, "cat index.md " + "x" * 10_000)
    assert result.reason is not None and "longer than" in result.reason


def test_symlink_target_is_really_outside(repo: Path) -> None:
    # The case only means something if the committed symlink would leak /etc/passwd.
    assert os.path.islink(repo / "notes.md")
    assert "root:" in run_in_shell("cat notes.md", repo).stdout


# --- unbounded: a bounded result -----------------------------------------------------------


def _assert_all_gone(recorder: RecordingExecutor) -> None:
    assert recorder.pids
    for pid in recorder.pids:
        with pytest.raises(ChildProcessError):
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG)
    assert live_processes_in_groups(recorder.pids) == []


@pytest.fixture(scope="module")
def long_history(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_long_history_repo(tmp_path_factory.mktemp("long") / "repo", 10_000)


def test_git_log_p_on_10000_commits_is_truncated_quickly(
    long_history: Path, recorder: RecordingExecutor
) -> None:
    before = snapshot(long_history)
    assert run_in_shell("git rev-list --count HEAD", long_history).stdout == "10000\n"
    result = Sandbox(long_history, executor=recorder).run("git log -p")
    assert result.truncated and not result.timed_out and not result.refused
    assert result.elapsed_s < 3.0
    assert result.output.startswith("commit ")
    assert result.output.endswith("[output truncated at 32000 bytes]\n")
    body = result.output.rsplit("\n[output truncated", 1)[0]
    assert len(body.encode()) <= 32_000
    _assert_all_gone(recorder)
    assert snapshot(long_history) == before


def test_git_log_p_piped_into_head_on_10000_commits(
    long_history: Path, recorder: RecordingExecutor
) -> None:
    result = Sandbox(long_history, executor=recorder).run("git log -p | head -3")
    assert not result.truncated and not result.timed_out
    assert result.output.splitlines()[0].startswith("commit ")
    assert len(result.output.splitlines()) == 3
    assert result.elapsed_s < 3.0
    _assert_all_gone(recorder)


def test_catastrophic_backreference_regex_is_bounded(
    tmp_path: Path, recorder: RecordingExecutor
) -> None:
    repo = build_memory_repo(tmp_path / "users" / "ana")
    line = "".join(chr(ord("a") + (i * 7) % 26) for i in range(6_000))
    (repo / "timeline" / "2024-01.md").write_text(line + "\n", encoding="utf-8")
    before = snapshot(repo)
    sandbox = Sandbox(repo, timeout_s=2.0, executor=recorder)
    start = time.monotonic()
    result = sandbox.run("grep -E '(.*)(.*)\\2\\1' timeline/2024-01.md")
    assert time.monotonic() - start < 2.0 + 1.5
    assert not result.refused
    assert result.timed_out or result.exit_code in (0, 1, 2)
    if result.timed_out:
        assert "timed out after 2 s" in result.output and result.exit_code == 124
    _assert_all_gone(recorder)
    assert snapshot(repo) == before


# --- must still work: the same output as sh -----------------------------------------------

MUST_WORK = [
    "cat index.md",
    "git log --format='%h %ad' --date=relative --name-only -15",
    'grep -n "birthday\\|surgery" memories/people/*.md | head -20',
    "git diff HEAD~3.. -- timeline/2024-03.md; git log --stat -5 -- memories/people/sam.md",
    "git blame -L 1,20 profile.md",
    "git show HEAD~1:index.md | head -30",
    'cat "memories/people/zoë.md"',
    "cat 'memories/people/anna maria.md'",
    "cat memories/people/anna\\ maria.md",
]


@pytest.mark.parametrize("command", MUST_WORK)
def test_must_still_work_like_a_shell(
    repo: Path, recorder: RecordingExecutor, command: str
) -> None:
    before = snapshot(repo)
    result = Sandbox(repo, executor=recorder).run(command)
    after = snapshot(repo)
    expected = run_in_shell(command, repo)
    assert expected.returncode == 0 and expected.stderr == ""
    assert expected.stdout.strip()
    assert not result.refused and not result.truncated and not result.timed_out
    assert result.exit_code == 0
    assert result.output == expected.stdout
    assert after == before
    _assert_all_gone(recorder)


def test_fixture_history_is_deep_enough(repo: Path) -> None:
    assert git(["rev-parse", "--verify", "-q", "HEAD~3"], repo).returncode == 0
