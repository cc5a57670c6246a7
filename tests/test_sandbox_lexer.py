"""Word splitting, quoting and operators of the sandbox's sh subset."""

from __future__ import annotations

import subprocess

import pytest
from memrepo.sandbox.lexer import Word, parse
from memrepo.sandbox.result import SandboxRefusal


def _argvs(command: str) -> list[tuple[str, list[list[str]]]]:
    return [(p.connector, [[w.text for w in cmd] for cmd in p.commands]) for p in parse(command)]


@pytest.mark.parametrize(
    ("command", "words"),
    [
        ("cat index.md", ["cat", "index.md"]),
        ("  cat\tindex.md  ", ["cat", "index.md"]),
        ("grep 'a b' x", ["grep", "a b", "x"]),
        ("grep 'it''s' x", ["grep", "its", "x"]),
        ('grep "a \\"b\\" \\$ \\\\ \\x" f', ["grep", 'a "b" $ \\ \\x', "f"]),
        ("grep a\\ b f", ["grep", "a b", "f"]),
        ('grep "birthday\\|surgery" f', ["grep", "birthday\\|surgery", "f"]),
        ("grep 'x$' f", ["grep", "x$", "f"]),
        ('grep "x$" f', ["grep", "x$", "f"]),
        ("grep x$ f", ["grep", "x$", "f"]),
        ("grep '$(touch p)' f", ["grep", "$(touch p)", "f"]),
        ("cat '' x", ["cat", "", "x"]),
        ('cat ""', ["cat", ""]),
        ("cat a\\\nb", ["cat", "ab"]),
        ("git show HEAD~1:index.md", ["git", "show", "HEAD~1:index.md"]),
        ("git show 'HEAD@{1}'", ["git", "show", "HEAD@{1}"]),
        ("cat x # a comment; touch pwned", ["cat", "x"]),
        ("cat a#b", ["cat", "a#b"]),
        ("cat zoë.md", ["cat", "zoë.md"]),
    ],
)
def test_words_are_split_as_sh_would(command: str, words: list[str]) -> None:
    assert _argvs(command) == [(";", [words])]
    shell = subprocess.run(
        ["sh", "-c", "printf '[%s]' " + command], capture_output=True, text=True, check=True
    )
    assert shell.stdout == "".join(f"[{w}]" for w in words)


def test_operators_make_pipelines_and_chains() -> None:
    assert _argvs("a | b x | c; d && e || f\ng") == [
        (";", [["a"], ["b", "x"], ["c"]]),
        (";", [["d"]]),
        ("&&", [["e"]]),
        ("||", [["f"]]),
        (";", [["g"]]),
    ]


def test_newline_after_an_operator_continues_the_line() -> None:
    assert _argvs("a |\n b &&\n\n c\n\n") == [(";", [["a"], ["b"]]), ("&&", [["c"]])]


def test_trailing_semicolon_is_allowed() -> None:
    assert _argvs("a;") == [(";", [["a"]])]


def test_quoted_glob_characters_are_literal() -> None:
    word = parse("cat 'a*'b*")[0].commands[0][1]
    assert word.text == "a*b*"
    assert word.has_glob
    assert word.glob_pattern == "a[*]b*"
    assert not parse("cat 'a*' \\?")[0].commands[0][1].has_glob
    assert not parse("cat 'a*' \\?")[0].commands[0][2].has_glob


def test_assignment_needs_an_unquoted_name() -> None:
    assert Word("A=1", (False, False, False)).is_assignment
    assert not Word("A=1", (True, False, False)).is_assignment
    assert not Word("--format=%h", (False,) * 11).is_assignment


@pytest.mark.parametrize(
    ("command", "fragment"),
    [
        ("grep x $(cat f)", "command substitution"),
        ('grep x "$(cat f)"', "command substitution"),
        ("grep x `cat f`", "command substitution"),
        ('grep x "`cat f`"', "command substitution"),
        ("grep $HOME f", "`$` expansions"),
        ('grep "${HOME}" f', "`$` expansions"),
        ("grep $'a' f", "`$` expansions"),
        ("grep x <(cat f)", "process substitution"),
        ("grep x >(cat)", "process substitution"),
        ("git log > f", "redirections"),
        ("git log >> f", "redirections"),
        ("git log 2> f", "redirections"),
        ("git log &> f", "redirections"),
        ("cat < f", "redirections"),
        ("cat <<EOF", "redirections"),
        ("git log &", "background"),
        ("git log & touch p", "background"),
        ("(cat f)", "subshells"),
        ("{ cat f; }", "braces"),
        ("cat ~/x", "home directory"),
        ("cat ~", "home directory"),
        ("cat 'x", "unterminated single quote"),
        ('cat "x', "unterminated double quote"),
        ("| cat", "needs a command before it"),
        ("cat ||", "ends with an operator"),
        ("cat |", "ends with an operator"),
        ("cat &&\n", "ends with an operator"),
        ("; cat", "needs a command before it"),
        ("cat ;; cat", "`;;`"),
        ("", "empty command"),
        ("  \n # only a comment", "empty command"),
        ("cat a\0b", "NUL"),
    ],
)
def test_shell_features_are_refused(command: str, fragment: str) -> None:
    with pytest.raises(SandboxRefusal) as info:
        parse(command)
    assert fragment in info.value.reason
