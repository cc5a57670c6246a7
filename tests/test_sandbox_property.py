"""Generated hostile command strings: only allowlisted programs ever start, nothing is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from memrepo.gitcli import HARDENING_CONFIG
from memrepo.sandbox import Sandbox, SandboxRefusal
from memrepo.sandbox.gitprograms import GIT_SUBCOMMANDS, SANDBOX_GIT_CONFIG
from memrepo.sandbox.programs import ALLOWED_PROGRAMS
from test_sandbox_support import (
    RecordingExecutor,
    build_memory_repo,
    live_processes_in_groups,
    pwned_files,
    snapshot,
)

PROGRAMS = [
    *ALLOWED_PROGRAMS,
    *["git"] * 4,
    "touch", "rm", "sh", "bash", "env", "sed", "awk", "find", "xargs", "tee", "yes", "python3",
    "/bin/sh", "./cat", "exec", "eval", "!", "GIT_DIR=x", "*", "c?t",
]  # fmt: skip
GIT_WORDS = [
    *GIT_SUBCOMMANDS, "status", "stash", "gc", "config", "branch", "commit", "checkout", "reset",
    "x", "init", "clean", "worktree", "update-ref", "archive", "bundle", "-c", "-C", "-P",
    "--git-dir=.", "--work-tree=/", "--exec-path=.", "--no-pager", "core.pager=touch pwned",
    "alias.x=!touch pwned",
]  # fmt: skip
FLAGS = [
    "-n", "-f", "-F", "-o", "-r", "-R", "-e", "-c", "-i", "-p", "-5", "-U3", "-O", "-Opwned",
    "-L", "1,2", "-s", "-t", "-l", "-1", "-A", "2", "-exec", "--follow", "--output=pwned",
    "--open-files-in-pager=touch pwned", "--ext-diff", "--textconv", "--no-index", "--all",
    "--format=%h %G?", "--format=%h", "--contents", "--stat", "-k2", "--compress-program=touch",
    "-T", ".", "--files0-from=x", "--",
]  # fmt: skip
ARGS = [
    "index.md", "profile.md", "memories/people/*.md", "memories/*/", "*", ".*", "../x",
    "/etc/passwd", "/dev/zero", "notes.md", ".git/config", ".git", "pwned", "'pwned'",
    '"a b"', "HEAD~1", "HEAD:index.md", "HEAD:../x", "-", "~", "~/x", "Sam", "'Sam|Zo'",
    "'(.*)\\1'", "[ab]*", "x\\ y", "'$(touch pwned)'", "touch",
]  # fmt: skip
OPERATORS = [
    ";", "&&", "||", "|", "\n", "&", ">", ">>", "<", "2>", "&>", "<<", "$(", "`", ")", "(",
    "<(", ">(", "$HOME", "${X}", "$'x'", "#", "'", '"', "\\", "{", "}", ";;", "\\;", "$",
]  # fmt: skip

_token = st.one_of(
    st.sampled_from(PROGRAMS),
    st.sampled_from(GIT_WORDS),
    st.sampled_from(FLAGS),
    st.sampled_from(ARGS),
    st.sampled_from(OPERATORS),
)
_command = st.lists(
    st.tuples(_token, st.sampled_from([" ", " ", "", "\t"])), min_size=1, max_size=14
).map(lambda parts: "".join(token + sep for token, sep in parts))
# Commands that start like a real one get further than the lexer more often.
_rooted = st.tuples(st.sampled_from(["git", *ALLOWED_PROGRAMS]), _command).map(" ".join)

ALLOWED_CONFIG = set(HARDENING_CONFIG) | set(SANDBOX_GIT_CONFIG)


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_memory_repo(tmp_path_factory.mktemp("property") / "ana")


def _assert_allowlisted(argv: list[str]) -> None:
    assert argv[0] in ALLOWED_PROGRAMS, argv
    if argv[0] != "git":
        return
    index = 1
    while argv[index] == "-c":
        assert argv[index + 1] in ALLOWED_CONFIG, argv
        index += 2
    assert argv[index] == "--no-pager", argv
    assert argv[index + 1] in GIT_SUBCOMMANDS, argv


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(command=st.one_of(_command, _rooted))
def test_generated_commands_run_only_allowlisted_programs_and_write_nothing(
    repo: Path, command: str
) -> None:
    before = snapshot(repo)
    recorder = RecordingExecutor()
    sandbox = Sandbox(repo, timeout_s=2.0, max_output_bytes=4_000, executor=recorder)
    try:
        sandbox.check(command)
        accepted = True
    except SandboxRefusal:
        accepted = False
    result = sandbox.run(command)
    event("accepted" if accepted else "refused")
    assert result.refused is not accepted
    if result.refused:
        assert recorder.argvs == [] and result.reason
    for argv in recorder.argvs:
        _assert_allowlisted(argv)
    assert result.elapsed_s < 2.0 + 1.0
    assert live_processes_in_groups(recorder.pids) == []
    assert snapshot(repo) == before
    assert pwned_files(repo.parent) == []
