"""The allowlist: programs, options as each program parses them, paths, globs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from memrepo.gitcli import git_argv
from memrepo.sandbox.gitprograms import GIT_SUBCOMMANDS, SANDBOX_GIT_CONFIG
from memrepo.sandbox.lexer import parse
from memrepo.sandbox.policy import MAX_GLOB_MATCHES, MAX_PROCESSES, Policy
from memrepo.sandbox.programs import ALLOWED_PROGRAMS
from memrepo.sandbox.result import SandboxRefusal


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    for rel in (
        "profile.md",
        "index.md",
        "memories/people/sam.md",
        "memories/people/zoë.md",
        "memories/people/anna maria.md",
        "memories/contexts/work.md",
        "timeline/2024-01.md",
        "timeline/2024-03.md",
        ".hidden.md",
        ".git/config",
    ):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x\n", encoding="utf-8")
    os.symlink("/etc/passwd", root / "notes.md")
    os.symlink("/etc", root / "memories" / "etc")
    os.symlink("profile.md", root / "me.md")
    (tmp_path / "other.md").write_text("secret\n", encoding="utf-8")
    return root


def _argvs(repo: Path, command: str) -> list[list[str]]:
    plan = Policy(repo).plan(parse(command))
    return [list(stage.argv) for pipeline in plan for stage in pipeline.stages]


def _refusal(repo: Path, command: str) -> str:
    with pytest.raises(SandboxRefusal) as info:
        Policy(repo).plan(parse(command))
    return info.value.reason


def _git(*args: str) -> list[str]:
    config = [arg for item in SANDBOX_GIT_CONFIG for arg in ("-c", item)]
    return git_argv([*config, "--no-pager", *args])


@pytest.mark.parametrize(
    ("command", "argv"),
    [
        ("grep -inA3 x profile.md", ["grep", "-inA3", "x", "profile.md"]),
        ("grep -in -A 3 x profile.md", ["grep", "-in", "-A", "3", "x", "profile.md"]),
        ("grep -e -x -e y profile.md", ["grep", "-e", "-x", "-e", "y", "profile.md"]),
        ("grep -E 'a|b' -m1 -5 index.md", ["grep", "-E", "a|b", "-m1", "-5", "index.md"]),
        ("grep --max-count 2 --color=never x", ["grep", "--max-count", "2", "--color=never", "x"]),
        ("grep x -- -n", ["grep", "x", "--", "-n"]),
        ("grep -rn birthday", ["grep", "--exclude-dir=.git", "-rn", "birthday"]),
        ("grep --recursive x .", ["grep", "--exclude-dir=.git", "--recursive", "x", "."]),
        ("head -20 index.md", ["head", "-20", "index.md"]),
        ("head -n -2 index.md", ["head", "-n", "-2", "index.md"]),
        ("tail -n +3 index.md", ["tail", "-n", "+3", "index.md"]),
        ("tail -c5 -", ["tail", "-c5", "-"]),
        ("sort -k2,2n -t, -ru", ["sort", "-k2,2n", "-t,", "-ru"]),
        ("uniq -c", ["uniq", "-c"]),
        ("cut -d: -f1,3-4 index.md", ["cut", "-d:", "-f1,3-4", "index.md"]),
        ("wc -l me.md", ["wc", "-l", "me.md"]),
        ("ls -la memories", ["ls", "-la", "memories"]),
        ("cat memories/people/../../index.md", ["cat", "memories/people/../../index.md"]),
    ],
)
def test_allowed_commands_keep_their_arguments(repo: Path, command: str, argv: list[str]) -> None:
    assert _argvs(repo, command) == [argv]


@pytest.mark.parametrize(
    ("command", "args"),
    [
        ("git log --oneline -5", ["log", "--no-ext-diff", "--no-textconv", "--oneline", "-5"]),
        ("git --no-pager log -n 3", ["log", "--no-ext-diff", "--no-textconv", "-n", "3"]),
        ("git show HEAD~1:index.md", ["show", "--no-ext-diff", "--no-textconv", "HEAD~1:index.md"]),
        (
            "git diff -U1 HEAD~3.. -- timeline",
            ["diff", *["--no-ext-diff", "--no-textconv"], "-U1", "HEAD~3..", "--", "timeline"],
        ),
        ("git blame -L 1,20 profile.md", ["blame", "--no-textconv", "-L", "1,20", "profile.md"]),
        ("git grep -n -e Alice HEAD", ["grep", "--no-textconv", "-n", "-e", "Alice", "HEAD"]),
        ("git shortlog -sn HEAD", ["shortlog", "-sn", "HEAD"]),
        ("git cat-file -p HEAD:index.md", ["cat-file", "-p", "HEAD:index.md"]),
        ("git rev-parse --short=8 HEAD", ["rev-parse", "--short=8", "HEAD"]),
        ("git ls-tree -r --name-only HEAD", ["ls-tree", "-r", "--name-only", "HEAD"]),
        (
            "git log --format='%h %s' --date=format:%Y",
            ["log", "--no-ext-diff", "--no-textconv", "--format=%h %s", "--date=format:%Y"],
        ),
    ],
)
def test_git_runs_hardened_with_the_subcommand_after_the_config(
    repo: Path, command: str, args: list[str]
) -> None:
    assert _argvs(repo, command) == [_git(*args)]


def test_pipelines_and_chains_become_stages(repo: Path) -> None:
    plan = Policy(repo).plan(parse("cat index.md | head -2 || ls; wc -l index.md"))
    assert [p.connector for p in plan] == [";", "||", ";"]
    assert [[s.program for s in p.stages] for p in plan] == [["cat", "head"], ["ls"], ["wc"]]


def test_globs_expand_sorted_inside_the_repository(repo: Path) -> None:
    assert _argvs(repo, "cat memories/people/*.md") == [
        ["cat", "memories/people/anna maria.md", "memories/people/sam.md", "memories/people/zoë.md"]
    ]
    assert _argvs(repo, "cat timeline/2024-0[13].md") == [
        ["cat", "timeline/2024-01.md", "timeline/2024-03.md"]
    ]
    # no match: left as it is; quoted: never expanded; hidden files: not matched by *
    assert _argvs(repo, "grep -E a.*b nothing*.md") == [["grep", "-E", "a.*b", "nothing*.md"]]
    assert _argvs(repo, "cat 'memories/people/*.md'") == [["cat", "memories/people/*.md"]]
    assert _argvs(repo, "cat *hidden.md") == [["cat", "*hidden.md"]]
    assert _argvs(repo, "cat .*.md") == [["cat", ".hidden.md"]]
    # a glob that reaches a symbolic link out of the repository is refused as a whole
    assert "resolves outside" in _refusal(repo, "ls *")


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        # programs
        ("touch pwned", "`touch` is not allowed; allowed programs: " + ", ".join(ALLOWED_PROGRAMS)),
        ("sed -n 1p x", "use grep, head, tail or cut"),
        ("/bin/cat index.md", "by name"),
        ("./cat index.md", "by name"),
        ("GIT_DIR=/tmp cat index.md", "variable assignments"),
        ("cat index.md | " * MAX_PROCESSES + "cat", f"at most {MAX_PROCESSES} programs"),
        # options
        ("grep -R x .", "use -r"),
        ("grep -P x index.md", "`grep -P` is not allowed; allowed options:"),
        ("grep -nP x index.md", "-P (in `-nP`)"),
        ("grep --col=never x index.md", "`grep --col` is not allowed"),
        ("grep --file=p index.md", "pattern files"),
        ("grep -m x y index.md", "bad value `x` for `grep -m`"),
        ("grep -A", "needs a value"),
        ("head -n abc index.md", "bad value"),
        ("tail --fol index.md", "`tail --fol` is not allowed"),
        ("tail -nf 3 index.md", "bad value `f`"),
        ("tail -qf index.md", "never ends"),
        ("sort -o x index.md", "writes a file"),
        ("sort --compress-program=sh index.md", "starts another program"),
        ("uniq index.md out.md", "at most 1 file operand"),
        ("wc --files0-from=x", "file lists"),
        ("cut -f x index.md", "bad value"),
        ("ls -L", "symbolic links"),
        ("cat --version", "not allowed"),
        # paths
        ("cat ../other.md", "outside the repository"),
        ("cat memories/../../other.md", "outside the repository"),
        ("cat -- ../other.md", "outside the repository"),
        ("cat memories/etc/passwd", "resolves outside"),
        ("ls memories/etc", "resolves outside"),
        ("cat .git/config", "inside .git"),
        ("ls .git", "inside .git"),
        ("grep -r x .git", "inside .git"),
        ("cat memories/*/passwd", "resolves outside"),
        ("cat ../*", "reaches outside"),
        ("cat /etc/pass*", "reaches outside"),
        ("cat .g*/config", "inside .git"),
        ("head -n 3 /proc/self/environ", "absolute path"),
        # git
        ("git", "needs a subcommand"),
        ("git -P log", "not allowed before the subcommand"),
        ("git --exec-path=/tmp log", "program directory"),
        ("git --work-tree=/ log", "user's repository"),
        ("git status", "may write the index"),
        ("git checkout HEAD~1", "`git checkout` is not allowed"),
        ("git log --since 2.weeks", "write `--since=VALUE`"),
        ("git log --outp=x", "`git log --outp` is not allowed"),
        ("git log -Ox", "order files"),
        ("git log --ext-diff", "external diff"),
        ("git log --textconv", "textconv"),
        ("git log --format=%G?", "signature"),
        ("git log --all", "not allowed"),
        ("git log -- ../x", "outside the repository"),
        ("git log ../x", "outside the repository"),
        ("git show HEAD:../other.md", "outside the repository"),
        ("git show HEAD:/etc/passwd", "absolute path"),
        ("git diff /dev/null index.md", "absolute path"),
        ("git blame --contents /etc/passwd profile.md", "another file"),
        ("git blame -S revs profile.md", "revision files"),
        ("git blame -L 1,2:x profile.md", "no file part"),
        ("git grep -Oless x", "pager"),
        ("git grep -f p", "pattern files"),
        ("git cat-file -p -t HEAD", "exactly one of -p, -s, -t"),
        ("git cat-file HEAD", "exactly one of"),
        ("git cat-file --batch", "not allowed"),
        ("git cat-file -p", "needs 1 operand"),
        ("git ls-files -X /etc/passwd", "exclude files"),
    ],
)
def test_refusals_say_why(repo: Path, command: str, fragment: str) -> None:
    assert fragment in _refusal(repo, command)


def test_every_git_subcommand_has_a_spec_named_for_it() -> None:
    for name, spec in GIT_SUBCOMMANDS.items():
        assert spec.name == f"git {name}"
        assert spec.operands == "rev_or_path" and not spec.long_separate


def test_globs_are_bounded(repo: Path) -> None:
    many = repo / "many"
    many.mkdir()
    for i in range(MAX_GLOB_MATCHES + 1):
        (many / f"{i}.md").touch()
    assert "matches more than" in _refusal(repo, "cat many/*")
    names_starting_with_1 = ["1", *range(10, 20), *range(100, 200), "1000"]
    assert len(_argvs(repo, "cat many/1*")[0]) == 1 + len(names_starting_with_1)
    os.symlink(".", repo / "loop")
    assert "wildcard levels" in _refusal(repo, "cat l*/l*/l*/l*/*.md")
    assert _argvs(repo, "cat l*/l*/l*/index.md") == [["cat", "loop/loop/loop/index.md"]]


def test_symlink_inside_the_repository_is_fine(repo: Path) -> None:
    assert _argvs(repo, "cat me.md") == [["cat", "me.md"]]


def test_check_path_accepts_the_root_and_missing_files(repo: Path) -> None:
    policy = Policy(repo)
    for arg in (".", "", "missing.md", "memories/../index.md", "HEAD~3.."):
        policy.check_path(arg)
