"""The allowlist: which programs and options ``run`` accepts (git's part is in ``gitprograms``).

Every option a program accepts is listed; anything else is refused. A :class:`ProgramSpec`
describes the options the way the program parses them (GNU getopt_long for coreutils and grep:
clustered short options, values attached or in the next word, ``--long=value`` or
``--long value``), so the policy reads each argument exactly as the program will and knows which
arguments are paths.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

#: Checks an option's value; returns a short hint when the value is refused, ``None`` when fine.
ValueCheck = Callable[[str], "str | None"]

OperandKind = Literal["path", "rev_or_path"]


def matching(pattern: str, hint: str) -> ValueCheck:
    """A check accepting values that fully match ``pattern``; ``hint`` says what was expected."""
    compiled = re.compile(pattern)

    def check(value: str) -> str | None:
        return None if compiled.fullmatch(value) else hint

    return check


def any_value(value: str) -> str | None:
    """A check accepting every value (patterns, separators, format strings)."""
    return None


def one_of(*choices: str) -> ValueCheck:
    """A check accepting exactly one of ``choices``."""

    def check(value: str) -> str | None:
        return None if value in choices else "one of " + ", ".join(choices)

    return check


NUM = matching(r"\d+", "a number")
SIGNED_NUM = matching(r"[+-]?\d+", "a number, optionally with + or -")
HEAD_NUM = matching(r"-?\d+", "a number, optionally negative")
FIELD_LIST = matching(r"[0-9,-]+", "a list like 1,3-5")
_SORT_POS = r"[0-9]+(\.[0-9]+)?[bdfgiMhnRrV]*"
SORT_KEY = matching(f"{_SORT_POS}(,{_SORT_POS})?", "a KEYDEF like 2,2n")
COLOR = one_of("never", "auto")


@dataclass(frozen=True)
class ProgramSpec:
    """How one program (or one git subcommand) parses its arguments, and what it may be given.

    Attributes:
        name: the program name, or ``git <subcommand>``.
        flags: options without a value, short (``-n``) or long (``--count``).
        valued: options that take a value: short ones attached (``-A3``) or in the next word;
            long ones as ``--opt=value``, or ``--opt value`` when ``long_separate``.
        optional: long options whose value is optional and only given as ``--opt=value``.
        word_patterns: whole-word options given as regular expressions (``-NUM``, ``-U3``).
        denied: options refused with a specific reason (the rest are refused generically).
        long_separate: long options take their value from the next word (GNU getopt_long).
        pattern_options: options that give the pattern, so no operand is the pattern.
        first_operand_is_pattern: the first operand is a pattern, not a path (grep).
        operands: ``path`` (every operand a file) or ``rev_or_path`` (git revisions, ``REV:path``
            and paths; all after ``--`` are paths).
        max_operands: the most operands allowed (``None``: any number).
        min_operands: the fewest operands required.
        exactly_one_of: options of which exactly one must be given (``git cat-file``).
        inject: arguments always added before the model's own.
        inject_if: arguments added when one of these options is present.
    """

    name: str
    flags: frozenset[str] = frozenset()
    valued: Mapping[str, ValueCheck] = field(default_factory=dict)
    optional: Mapping[str, ValueCheck] = field(default_factory=dict)
    word_patterns: tuple[re.Pattern[str], ...] = ()
    denied: Mapping[str, str] = field(default_factory=dict)
    long_separate: bool = True
    pattern_options: frozenset[str] = frozenset()
    first_operand_is_pattern: bool = False
    operands: OperandKind = "path"
    max_operands: int | None = None
    min_operands: int = 0
    exactly_one_of: frozenset[str] = frozenset()
    inject: tuple[str, ...] = ()
    inject_if: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def allowed_options(self) -> str:
        """Every accepted option, sorted and space-separated, for refusal messages."""
        names = set(self.flags) | set(self.valued) | set(self.optional)
        shown = sorted(names, key=lambda n: (n.startswith("--"), n.lower(), n))
        if any(p.pattern == r"-\d+" for p in self.word_patterns):
            shown.append("-NUM")
        return " ".join(shown)


def option_set(text: str) -> frozenset[str]:
    """The options named in a space-separated string."""
    return frozenset(text.split())


NUMERIC_WORD = (re.compile(r"-\d+"),)
_NO_FOLLOW = "waits for the file to grow and never ends; use `tail -n N FILE`"
WRITES_REASON = "writes a file; the output comes back to you anyway"

CAT = ProgramSpec(
    "cat",
    flags=option_set(
        "-A -b -e -E -n -s -t -T -v --show-all --number-nonblank --show-ends --number "
        "--squeeze-blank --show-tabs --show-nonprinting"
    ),
)

HEAD = ProgramSpec(
    "head",
    flags=option_set("-q -v --quiet --silent --verbose"),
    valued={"-n": HEAD_NUM, "-c": HEAD_NUM, "--lines": HEAD_NUM, "--bytes": HEAD_NUM},
    word_patterns=NUMERIC_WORD,
)

TAIL = ProgramSpec(
    "tail",
    flags=option_set("-q -v --quiet --silent --verbose"),
    valued={"-n": SIGNED_NUM, "-c": SIGNED_NUM, "--lines": SIGNED_NUM, "--bytes": SIGNED_NUM},
    word_patterns=NUMERIC_WORD,
    denied={
        "-f": _NO_FOLLOW,
        "-F": _NO_FOLLOW,
        "--follow": _NO_FOLLOW,
        "--retry": _NO_FOLLOW,
        "-s": _NO_FOLLOW,
        "--sleep-interval": _NO_FOLLOW,
        "--pid": _NO_FOLLOW,
    },
)

GREP = ProgramSpec(
    "grep",
    flags=option_set(
        "-a -c -E -F -G -h -H -i -I -l -L -n -o -q -r -s -v -w -x -y "
        "--text --count --extended-regexp --fixed-strings --basic-regexp --no-filename "
        "--with-filename --ignore-case --no-ignore-case --files-with-matches "
        "--files-without-match --line-number --only-matching --quiet --silent --recursive "
        "--no-messages --invert-match --word-regexp --line-regexp"
    ),
    valued={
        "-e": any_value,
        "--regexp": any_value,
        "-m": NUM,
        "--max-count": NUM,
        "-A": NUM,
        "-B": NUM,
        "-C": NUM,
        "--after-context": NUM,
        "--before-context": NUM,
        "--context": NUM,
        "--include": any_value,
        "--exclude": any_value,
        "--exclude-dir": any_value,
    },
    optional={"--color": COLOR, "--colour": COLOR},
    word_patterns=NUMERIC_WORD,
    denied={
        "-f": "pattern files are not allowed; give patterns with -e PATTERN",
        "--file": "pattern files are not allowed; give patterns with -e PATTERN",
        "--exclude-from": "reading option files is not allowed; use --exclude=GLOB",
        "-R": "follows symbolic links out of the repository; use -r",
        "--dereference-recursive": "follows symbolic links out of the repository; use -r",
    },
    pattern_options=frozenset({"-e", "--regexp"}),
    first_operand_is_pattern=True,
    # `grep -r` without a path searches ".", which holds .git: keep git's internals out.
    inject_if={"-r": ("--exclude-dir=.git",), "--recursive": ("--exclude-dir=.git",)},
)

LS = ProgramSpec(
    "ls",
    flags=option_set(
        "-1 -a -A -d -F -g -h -i -l -n -o -p -r -R -s -S -t -U -v -X "
        "--all --almost-all --directory --classify --human-readable --reverse --recursive "
        "--size --group-directories-first"
    ),
    optional={"--color": COLOR},
    denied={
        "-L": "follows symbolic links out of the repository",
        "--dereference": "follows symbolic links out of the repository",
    },
)

WC = ProgramSpec(
    "wc",
    flags=option_set("-c -l -L -m -w --bytes --chars --lines --words --max-line-length"),
    denied={"--files0-from": "reading file lists is not allowed; name the files"},
)

SORT = ProgramSpec(
    "sort",
    flags=option_set(
        "-b -d -f -g -h -i -M -n -r -s -u -V --ignore-leading-blanks --dictionary-order "
        "--ignore-case --general-numeric-sort --human-numeric-sort --ignore-nonprinting "
        "--month-sort --numeric-sort --reverse --stable --unique --version-sort"
    ),
    valued={"-k": SORT_KEY, "--key": SORT_KEY, "-t": any_value, "--field-separator": any_value},
    denied={
        "-o": WRITES_REASON,
        "--output": WRITES_REASON,
        "-T": "temporary directories are not allowed",
        "--temporary-directory": "temporary directories are not allowed",
        "--compress-program": "starts another program",
        "--files0-from": "reading file lists is not allowed; name the files",
    },
)

UNIQ = ProgramSpec(
    "uniq",
    flags=option_set("-c -d -D -i -u --count --repeated --all-repeated --ignore-case --unique"),
    valued={
        "-f": NUM,
        "-s": NUM,
        "-w": NUM,
        "--skip-fields": NUM,
        "--skip-chars": NUM,
        "--check-chars": NUM,
    },
    # uniq's second operand is an output file.
    max_operands=1,
)

CUT = ProgramSpec(
    "cut",
    flags=option_set("-s -n --only-delimited --complement"),
    valued={
        "-b": FIELD_LIST,
        "-c": FIELD_LIST,
        "-f": FIELD_LIST,
        "--bytes": FIELD_LIST,
        "--characters": FIELD_LIST,
        "--fields": FIELD_LIST,
        "-d": any_value,
        "--delimiter": any_value,
        "--output-delimiter": any_value,
    },
)

#: Programs other than git, by name.
PROGRAMS: Mapping[str, ProgramSpec] = MappingProxyType(
    {spec.name: spec for spec in (CAT, HEAD, TAIL, GREP, LS, WC, SORT, UNIQ, CUT)}
)

#: Every program name ``run`` executes.
ALLOWED_PROGRAMS: tuple[str, ...] = tuple(sorted([*PROGRAMS, "git"]))

#: Hints for programs that are refused but often asked for.
PROGRAM_HINTS: Mapping[str, str] = MappingProxyType(
    {
        "sed": "use grep, head, tail or cut",
        "awk": "use grep, cut or sort",
        "find": "use `git ls-files` or `ls -R`",
        "xargs": "name the files in the command itself (globs work)",
        "tee": "the output comes back to you anyway",
        "less": "the output comes back to you anyway",
        "more": "the output comes back to you anyway",
    }
)
