"""Shell-like word splitting and operators: the strict subset of POSIX sh that ``run`` accepts.

Words and quoting follow sh(1): single quotes keep everything literally; double quotes keep
everything but ``\\`` before ``$ ` " \\`` or a newline; a backslash outside quotes makes the next
character literal (and removes a backslash-newline). Commands join with ``|`` into pipelines and
pipelines with ``;``, ``&&``, ``||`` or a newline (read as ``;``); a newline right after ``|``,
``&&`` or ``||`` continues the line, as in sh, and ``#`` at the start of a word begins a comment.

Everything that would make a shell do more than split words is refused: command and process
substitution, parameter expansion, redirections and here-documents, background jobs, subshells and
brace groups, and ``~``. Glob characters are only *marked* here (see :attr:`Word.glob_pattern`);
the policy expands them against the repository.
"""

from __future__ import annotations

import glob
import re
from dataclasses import dataclass
from typing import Literal

from memrepo.sandbox.result import SandboxRefusal

Connector = Literal[";", "&&", "||"]

_GLOB_CHARS = frozenset("*?[")
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
#: After an unquoted ``$`` these characters leave it literal (sh expands nothing there).
_DOLLAR_LITERAL_NEXT = frozenset(" \t\n;|&")

_REDIRECT_REASON = (
    "redirections (`>`, `>>`, `<`, `2>`, `&>`, here-documents) are not allowed; "
    "the output comes back to you anyway"
)
_SUBST_REASON = (
    "command substitution (`$(...)` or backticks) is not allowed; run commands one by one"
)
_DOLLAR_REASON = (
    "`$` expansions (variables, `$(...)`, `${...}`) are not allowed; "
    "put patterns containing `$` in single quotes"
)


@dataclass(frozen=True)
class Word:
    """One shell word after quote removal.

    Attributes:
        text: the characters of the word, quotes removed.
        quoted: one flag per character of ``text``: ``True`` when the character was quoted or
            backslash-escaped (so it is never a glob character or part of an assignment name).
    """

    text: str
    quoted: tuple[bool, ...]

    @property
    def has_glob(self) -> bool:
        """Whether the word holds an unquoted ``*``, ``?`` or ``[`` (a pathname pattern)."""
        return any(c in _GLOB_CHARS and not q for c, q in zip(self.text, self.quoted, strict=True))

    @property
    def glob_pattern(self) -> str:
        """The word as a :mod:`glob` pattern: quoted glob characters escaped, others active."""
        return "".join(
            glob.escape(c) if q else c for c, q in zip(self.text, self.quoted, strict=True)
        )

    @property
    def is_assignment(self) -> bool:
        """Whether the word is ``NAME=value`` with an unquoted name (sh would assign it)."""
        match = _ASSIGNMENT.match(self.text)
        return match is not None and not any(self.quoted[: match.end()])


@dataclass(frozen=True)
class Pipeline:
    """Commands joined by ``|``.

    Attributes:
        connector: how this pipeline joins the one before it (``";"`` for the first).
        commands: each command's words, the program name first; never empty.
    """

    connector: Connector
    commands: tuple[tuple[Word, ...], ...]


class _Lexer:
    """Turns a command string into words and operator strings, refusing what sh would expand."""

    def __init__(self, source: str) -> None:
        self.src = source
        self.pos = 0
        self.tokens: list[Word | str] = []
        self._chars: list[str] = []
        self._quoted: list[bool] = []
        self._in_word = False

    def _add(self, char: str, quoted: bool) -> None:
        self._chars.append(char)
        self._quoted.append(quoted)
        self._in_word = True

    def _flush(self) -> None:
        if self._in_word:
            self.tokens.append(Word("".join(self._chars), tuple(self._quoted)))
        self._chars, self._quoted, self._in_word = [], [], False

    def _peek(self, offset: int = 1) -> str:
        index = self.pos + offset
        return self.src[index] if index < len(self.src) else ""

    def _check_dollar(self, in_double_quotes: bool) -> None:
        nxt = self._peek()
        if nxt == "(":
            raise SandboxRefusal(_SUBST_REASON)
        if nxt == "" or nxt in _DOLLAR_LITERAL_NEXT or (in_double_quotes and nxt == '"'):
            return
        raise SandboxRefusal(_DOLLAR_REASON)

    def run(self) -> list[Word | str]:
        src = self.src
        while self.pos < len(src):
            c = src[self.pos]
            if c in " \t":
                self._flush()
                self.pos += 1
            elif c == "\n":
                self._flush()
                self.tokens.append("\n")
                self.pos += 1
            elif c == "#" and not self._in_word:
                end = src.find("\n", self.pos)
                self.pos = len(src) if end < 0 else end
            elif c == "\\":
                self._backslash()
            elif c == "'":
                self._single_quotes()
            elif c == '"':
                self._double_quotes()
            else:
                self._unquoted(c)
        self._flush()
        return self.tokens

    def _backslash(self) -> None:
        nxt = self._peek()
        if nxt == "\n":
            self.pos += 2
        elif nxt:
            self._add(nxt, True)
            self.pos += 2
        else:
            self._add("\\", True)
            self.pos += 1

    def _single_quotes(self) -> None:
        end = self.src.find("'", self.pos + 1)
        if end < 0:
            raise SandboxRefusal("unterminated single quote")
        self._in_word = True
        for char in self.src[self.pos + 1 : end]:
            self._add(char, True)
        self.pos = end + 1

    def _double_quotes(self) -> None:
        src = self.src
        self._in_word = True
        self.pos += 1
        while self.pos < len(src) and src[self.pos] != '"':
            c = src[self.pos]
            if c == "\\" and self._peek() in ("$", "`", '"', "\\", "\n"):
                if self._peek() != "\n":
                    self._add(self._peek(), True)
                self.pos += 2
                continue
            if c == "`":
                raise SandboxRefusal(_SUBST_REASON)
            if c == "$":
                self._check_dollar(in_double_quotes=True)
            self._add(c, True)
            self.pos += 1
        if self.pos >= len(src):
            raise SandboxRefusal("unterminated double quote")
        self.pos += 1

    def _unquoted(self, c: str) -> None:
        nxt = self._peek()
        if c == "\0":
            raise SandboxRefusal("NUL characters are not allowed")
        if c == "`":
            raise SandboxRefusal(_SUBST_REASON)
        if c == "$":
            self._check_dollar(in_double_quotes=False)
        elif c in "<>":
            if nxt == "(":
                raise SandboxRefusal("process substitution (`<(...)`, `>(...)`) is not allowed")
            raise SandboxRefusal(_REDIRECT_REASON)
        elif c in "()":
            raise SandboxRefusal("subshells and parentheses are not allowed; quote a literal `(`")
        elif c in "{}":
            raise SandboxRefusal("braces are not allowed; quote a literal `{` or `}`")
        elif c == "~" and not self._in_word:
            raise SandboxRefusal("`~` (the home directory) is outside the repository")
        elif c in "|&;":
            self._operator(c, nxt)
            return
        self._add(c, False)
        self.pos += 1

    def _operator(self, c: str, nxt: str) -> None:
        self._flush()
        if c == "&" and nxt == ">":
            raise SandboxRefusal(_REDIRECT_REASON)
        if c == "&" and nxt != "&":
            raise SandboxRefusal("background jobs (`&`) are not allowed")
        if c == ";" and nxt == ";":
            raise SandboxRefusal("`;;` is not allowed")
        if c in "|&" and nxt == c:
            self.tokens.append(c + c)
            self.pos += 2
        else:
            self.tokens.append(c)
            self.pos += 1


def parse(command: str) -> tuple[Pipeline, ...]:
    """Split a command string into pipelines of commands of words, as sh(1) would.

    Args:
        command: the command string the model sent.

    Returns:
        The pipelines in order, at least one, each with at least one command.

    Raises:
        SandboxRefusal: the string uses a shell feature that is not supported (expansion,
            substitution, redirection, background, subshell, braces), a quote is unterminated,
            or an operator lacks a command on one side.
    """
    pipelines: list[Pipeline] = []
    connector: Connector = ";"
    commands: list[tuple[Word, ...]] = []
    words: list[Word] = []

    def finish_pipeline() -> None:
        nonlocal commands, words
        commands.append(tuple(words))
        pipelines.append(Pipeline(connector, tuple(commands)))
        commands, words = [], []

    for item in _Lexer(command).run():
        if isinstance(item, Word):
            words.append(item)
        elif item == "\n":
            if words:
                finish_pipeline()
                connector = ";"
        elif not words:
            raise SandboxRefusal(f"`{item}` needs a command before it")
        elif item == "|":
            commands.append(tuple(words))
            words = []
        else:
            finish_pipeline()
            connector = ";" if item == ";" else ("&&" if item == "&&" else "||")
    if words:
        finish_pipeline()
    elif commands or connector != ";":
        raise SandboxRefusal("the command ends with an operator that needs a command after it")
    if not pipelines:
        raise SandboxRefusal("empty command")
    return tuple(pipelines)
