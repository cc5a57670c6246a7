"""The policy: from parsed pipelines to the exact argv lists that may run, or a refusal.

Globs are expanded here against the repository (sorted, left as they are when nothing matches, as
sh does); every argument is then read the way its program will read it (see
:mod:`memrepo.sandbox.programs` and :mod:`memrepo.sandbox.gitprograms`) and every argument that
names a file must resolve, symbolic links included, inside the repository and outside ``.git``.
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from memrepo.gitcli import git_argv
from memrepo.sandbox.gitprograms import (
    GIT_GLOBAL_DENIED,
    GIT_GLOBAL_FLAGS,
    GIT_SUBCOMMAND_HINTS,
    GIT_SUBCOMMANDS,
    SANDBOX_GIT_CONFIG,
)
from memrepo.sandbox.lexer import Connector, Pipeline, Word
from memrepo.sandbox.programs import (
    ALLOWED_PROGRAMS,
    PROGRAM_HINTS,
    PROGRAMS,
    ProgramSpec,
    ValueCheck,
)
from memrepo.sandbox.result import SandboxRefusal

#: The most programs one command string may start (all pipelines together).
MAX_PROCESSES = 16
#: The most paths one glob may expand to.
MAX_GLOB_MATCHES = 1_000
#: The most path components with glob characters in one word (``*/*/*`` has 3); globbing runs in
#: this process, outside the time limit, so its work must stay small.
MAX_GLOB_PARTS = 4


@dataclass(frozen=True)
class Stage:
    """One program of a pipeline, ready to run.

    Attributes:
        argv: the full argument vector (for git, with the hardening ``-c`` options).
        program: the allowlisted program name (``argv[0]``).
    """

    argv: tuple[str, ...]
    program: str


@dataclass(frozen=True)
class PlannedPipeline:
    """A pipeline the policy accepted.

    Attributes:
        connector: ``";"``, ``"&&"`` or ``"||"``: how it joins the pipeline before it.
        stages: the programs, output of each piped into the next.
    """

    connector: Connector
    stages: tuple[Stage, ...]


class Policy:
    """Decides, without running anything, whether parsed pipelines may run in one repository.

    Args:
        repo_root: the repository's working tree; resolved with :func:`os.path.realpath`.
    """

    def __init__(self, repo_root: Path) -> None:
        self._root = os.path.realpath(repo_root)

    def plan(self, pipelines: Sequence[Pipeline]) -> tuple[PlannedPipeline, ...]:
        """Turn parsed pipelines into stages to run.

        Args:
            pipelines: the output of :func:`memrepo.sandbox.lexer.parse`.

        Returns:
            The pipelines with the argv of every stage.

        Raises:
            SandboxRefusal: a program, subcommand, option or path is not allowed, a glob is too
                wide (:data:`MAX_GLOB_MATCHES`, :data:`MAX_GLOB_PARTS`), or the command would
                start more than :data:`MAX_PROCESSES` programs.
        """
        if sum(len(p.commands) for p in pipelines) > MAX_PROCESSES:
            raise SandboxRefusal(f"at most {MAX_PROCESSES} programs per command")
        return tuple(
            PlannedPipeline(p.connector, tuple(self._stage(words) for words in p.commands))
            for p in pipelines
        )

    def check_path(self, arg: str) -> None:
        """Refuse a path argument unless it resolves inside the repository and outside ``.git``.

        Args:
            arg: the path as the program will receive it, relative to the repository root.

        Raises:
            SandboxRefusal: the path is absolute, climbs out with ``..``, resolves outside
                through a symbolic link, or lies in ``.git``.
        """
        if os.path.isabs(arg):
            raise SandboxRefusal(
                f"`{arg}` is an absolute path; use paths relative to the repository root"
            )
        if os.path.normpath(arg).split(os.sep)[0] == "..":
            raise SandboxRefusal(f"`{arg}` is outside the repository")
        rel = os.path.relpath(os.path.realpath(os.path.join(self._root, arg)), self._root)
        first = rel.split(os.sep)[0]
        if first == "..":
            raise SandboxRefusal(f"`{arg}` resolves outside the repository (a symbolic link)")
        if first == ".git":
            raise SandboxRefusal(
                f"`{arg}` is inside .git; read history with git commands (git log, git show)"
            )

    # --- words -----------------------------------------------------------------------------

    def _expand(self, word: Word) -> list[str]:
        if not word.has_glob:
            return [word.text]
        pattern = word.glob_pattern
        parts = pattern.split("/")
        if os.path.isabs(pattern) or ".." in parts:
            raise SandboxRefusal(f"the glob `{word.text}` reaches outside the repository")
        if sum(1 for part in parts if any(c in part for c in "*?[")) > MAX_GLOB_PARTS:
            raise SandboxRefusal(
                f"the glob `{word.text}` has more than {MAX_GLOB_PARTS} wildcard levels"
            )
        matches: list[str] = []
        for match in glob.iglob(pattern, root_dir=self._root):
            matches.append(match)
            if len(matches) > MAX_GLOB_MATCHES:
                raise SandboxRefusal(
                    f"the glob `{word.text}` matches more than {MAX_GLOB_MATCHES} paths; narrow it"
                )
            self.check_path(match)
        return sorted(matches) or [word.text]

    def _stage(self, words: Sequence[Word]) -> Stage:
        if words[0].is_assignment:
            raise SandboxRefusal("variable assignments (`NAME=value cmd`) are not allowed")
        args = [arg for word in words for arg in self._expand(word)]
        if not args:
            raise SandboxRefusal("empty command")
        name = args[0]
        if "/" in name:
            raise SandboxRefusal(f"run programs by name (like `cat`), not by path: `{name}`")
        if name == "git":
            return self._git_stage(args[1:])
        spec = PROGRAMS.get(name)
        if spec is None:
            hint = PROGRAM_HINTS.get(name)
            raise SandboxRefusal(
                f"`{name}` is not allowed{'; ' + hint if hint else ''}; "
                f"allowed programs: {', '.join(ALLOWED_PROGRAMS)}"
            )
        return Stage((name, *self._check_args(spec, args[1:])), name)

    def _git_stage(self, args: Sequence[str]) -> Stage:
        index = 0
        while index < len(args) and args[index].startswith("-"):
            option = args[index]
            name = option.partition("=")[0]
            if name in GIT_GLOBAL_DENIED:
                raise SandboxRefusal(f"`git {name}`: {GIT_GLOBAL_DENIED[name]}")
            if option not in GIT_GLOBAL_FLAGS:
                raise SandboxRefusal(
                    f"`git {option}` is not allowed before the subcommand; "
                    f"allowed: {', '.join(sorted(GIT_GLOBAL_FLAGS))}"
                )
            index += 1
        allowed = ", ".join(GIT_SUBCOMMANDS)
        if index == len(args):
            raise SandboxRefusal(f"`git` needs a subcommand, one of: {allowed}")
        sub = args[index]
        spec = GIT_SUBCOMMANDS.get(sub)
        if spec is None:
            hint = GIT_SUBCOMMAND_HINTS.get(sub)
            raise SandboxRefusal(
                f"`git {sub}` is not allowed{': ' + hint if hint else ''}; "
                f"read-only subcommands: {allowed}"
            )
        config = [arg for item in SANDBOX_GIT_CONFIG for arg in ("-c", item)]
        final = self._check_args(spec, args[index + 1 :])
        return Stage(tuple(git_argv([*config, "--no-pager", sub, *final])), "git")

    # --- options and operands ------------------------------------------------------------------

    def _check_args(self, spec: ProgramSpec, args: Sequence[str]) -> list[str]:
        """Read ``args`` as ``spec``'s program will; return them with injected arguments first."""
        operands: list[tuple[str, bool]] = []  # (argument, came after "--")
        seen: list[str] = []
        index, end_of_options = 0, False
        while index < len(args):
            arg = args[index]
            index += 1
            if end_of_options or arg == "-" or not arg.startswith("-"):
                operands.append((arg, end_of_options))
            elif arg == "--":
                end_of_options = True
            else:
                following = args[index] if index < len(args) else None
                consumed, names = _read_option(spec, arg, following)
                index += consumed
                seen += names
        if spec.exactly_one_of and len(spec.exactly_one_of & set(seen)) != 1:
            choices = ", ".join(sorted(spec.exactly_one_of))
            raise SandboxRefusal(f"`{spec.name}` needs exactly one of {choices}")
        if spec.first_operand_is_pattern and operands and not spec.pattern_options & set(seen):
            operands = operands[1:]
        if spec.max_operands is not None and len(operands) > spec.max_operands:
            raise SandboxRefusal(f"`{spec.name}` takes at most {spec.max_operands} file operand(s)")
        if len(operands) < spec.min_operands:
            raise SandboxRefusal(f"`{spec.name}` needs {spec.min_operands} operand(s)")
        for arg, after_dashes in operands:
            self._check_operand(spec, arg, after_dashes)
        injected = list(spec.inject)
        for option, extra in spec.inject_if.items():
            if option in seen:
                injected += extra
        return [*injected, *args]

    def _check_operand(self, spec: ProgramSpec, arg: str, after_dashes: bool) -> None:
        if spec.operands == "path":
            if arg != "-":
                self.check_path(arg)
        elif after_dashes:
            self.check_path(arg)
        else:
            # A revision, a path, or REV:path (a path in that revision's tree).
            rev, colon, path = arg.partition(":")
            self.check_path(path if colon else rev)


def _read_option(spec: ProgramSpec, arg: str, following: str | None) -> tuple[int, list[str]]:
    """Read one option word (and maybe its value from the next word).

    Returns:
        How many following words were consumed as a value (0 or 1) and the option names read.

    Raises:
        SandboxRefusal: an option is denied, unknown, lacks its value, or has a bad value.
    """
    if any(pattern.fullmatch(arg) for pattern in spec.word_patterns):
        return 0, [arg]
    if arg.startswith("--"):
        name, eq, value = arg.partition("=")
        _refuse_denied(spec, name)
        if name in spec.flags and not eq:
            return 0, [name]
        if name in spec.optional:
            if eq:
                _check_value(spec, name, value, spec.optional[name])
            return 0, [name]
        if name in spec.valued:
            if eq:
                _check_value(spec, name, value, spec.valued[name])
                return 0, [name]
            if spec.long_separate and following is not None:
                _check_value(spec, name, following, spec.valued[name])
                return 1, [name]
            raise SandboxRefusal(f"`{spec.name} {name}` needs a value: write `{name}=VALUE`")
        _refuse_unknown(spec, name)
    names: list[str] = []
    for pos in range(1, len(arg)):
        option = "-" + arg[pos]
        _refuse_denied(spec, option)
        if option in spec.flags:
            names.append(option)
            continue
        if option in spec.valued:
            names.append(option)
            attached = arg[pos + 1 :]
            if attached:
                _check_value(spec, option, attached, spec.valued[option])
                return 0, names
            if following is None:
                raise SandboxRefusal(f"`{spec.name} {option}` needs a value")
            _check_value(spec, option, following, spec.valued[option])
            return 1, names
        _refuse_unknown(spec, option if len(arg) == 2 else f"{option} (in `{arg}`)")
    return 0, names


def _refuse_denied(spec: ProgramSpec, name: str) -> None:
    reason = spec.denied.get(name)
    if reason is not None:
        raise SandboxRefusal(f"`{spec.name} {name}` is not allowed: {reason}")


def _refuse_unknown(spec: ProgramSpec, name: str) -> NoReturn:
    raise SandboxRefusal(
        f"`{spec.name} {name}` is not allowed; allowed options: {spec.allowed_options()}"
    )


def _check_value(spec: ProgramSpec, name: str, value: str, check: ValueCheck) -> None:
    hint = check(value)
    if hint is not None:
        raise SandboxRefusal(f"bad value `{value}` for `{spec.name} {name}`: expected {hint}")
