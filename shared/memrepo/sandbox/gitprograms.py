"""The git part of the allowlist: read-only subcommands and the options each accepts.

git's own parsers read a long option's value only as ``--opt=value`` (``--format %h`` makes
``%h`` a revision), so the specs here set ``long_separate=False``; operands are revisions, paths
or ``REV:path``, all checked as paths (see :meth:`memrepo.sandbox.policy.Policy.check_path`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import partial
from types import MappingProxyType

from memrepo.sandbox.programs import (
    NUM,
    NUMERIC_WORD,
    WRITES_REASON,
    ProgramSpec,
    ValueCheck,
    any_value,
    matching,
    one_of,
    option_set,
)


def _git_format(value: str) -> str | None:
    # %G? and friends verify signatures by starting gpg; nothing else in a format runs a program
    # outside git.
    return "signature placeholders (%G...) are not allowed" if "%G" in value else None


#: ``-c`` settings added to every sandboxed git, on top of :data:`memrepo.gitcli.HARDENING_CONFIG`.
SANDBOX_GIT_CONFIG: tuple[str, ...] = (
    "log.showSignature=false",
    "log.mailmap=false",
    "grep.fallbackToNoIndex=false",
    "core.untrackedCache=false",
    "blame.ignoreRevsFile=",
    "color.ui=never",
)

GIT_GLOBAL_FLAGS = frozenset({"--no-pager"})

_IN_REPO = "git always runs in the user's repository; drop this option"
GIT_GLOBAL_DENIED: Mapping[str, str] = MappingProxyType(
    {
        "-c": "config overrides (`git -c`) are not allowed",
        "--config-env": "config overrides are not allowed",
        "-C": _IN_REPO,
        "--git-dir": _IN_REPO,
        "--work-tree": _IN_REPO,
        "--namespace": _IN_REPO,
        "--exec-path": "changing git's program directory is not allowed",
    }
)

_NO_EXTERNAL = ("--no-ext-diff", "--no-textconv")
_EXTERNAL_DENIED = {
    "--output": WRITES_REASON,
    "--ext-diff": "external diff programs are not allowed",
    "--textconv": "textconv filters are not allowed",
    "--no-index": "comparing files outside the repository is not allowed",
    "-O": "order files are not allowed",
}

_DIFF_FLAGS = option_set(
    "-p -u -s -a -b -w -R -W -M --patch --no-patch --raw --stat --shortstat --numstat "
    "--summary --name-only --name-status --no-color --full-index --abbrev --text "
    "--ignore-all-space --ignore-space-change --ignore-blank-lines --minimal --patience "
    "--histogram --find-renames --no-renames --pickaxe-all --pickaxe-regex --function-context "
    "--no-ext-diff --no-textconv"
)
_DIFF_VALUED: dict[str, ValueCheck] = {
    "-S": any_value,
    "-G": any_value,
    "--unified": NUM,
    "--diff-filter": matching(r"[ACDMRTUXBacdmrtuxb*]+", "letters like AMD"),
}
_DIFF_OPTIONAL: dict[str, ValueCheck] = {
    "--stat": matching(r"\d+(,\d+){0,2}", "WIDTH[,NAME-WIDTH[,COUNT]]"),
    "--color": one_of("never"),
    "--word-diff": one_of("plain", "porcelain", "none"),
    "--abbrev": NUM,
}
_FORMAT_FLAGS = option_set(
    "--oneline --abbrev-commit --no-abbrev-commit --relative-date --no-decorate --no-notes "
    "--parents --children --graph --source"
)
_FORMAT_OPTIONAL: dict[str, ValueCheck] = {
    "--pretty": _git_format,
    "--format": _git_format,
    "--date": any_value,
    "--decorate": one_of("short", "full", "auto", "no"),
}
_REV_FLAGS = option_set(
    "-i -E -F --regexp-ignore-case --extended-regexp --fixed-strings --basic-regexp --all-match "
    "--invert-grep --no-merges --merges --first-parent --reverse --date-order --topo-order "
    "--author-date-order --full-history --left-right"
)
_REV_VALUED: dict[str, ValueCheck] = {
    "-n": NUM,
    "--max-count": NUM,
    "--skip": NUM,
    "--since": any_value,
    "--after": any_value,
    "--until": any_value,
    "--before": any_value,
    "--author": any_value,
    "--committer": any_value,
    "--grep": any_value,
}
_UNIFIED = re.compile(r"-U\d+")


#: A git subcommand's spec: long options take values only as ``--opt=value``; operands are
#: revisions or paths.
_git = partial(ProgramSpec, long_separate=False, operands="rev_or_path")


GIT_LOG = _git(
    "git log",
    flags=_DIFF_FLAGS | _FORMAT_FLAGS | _REV_FLAGS | {"--follow"},
    valued={**_DIFF_VALUED, **_REV_VALUED},
    optional={**_DIFF_OPTIONAL, **_FORMAT_OPTIONAL},
    word_patterns=(*NUMERIC_WORD, _UNIFIED),
    denied=_EXTERNAL_DENIED,
    inject=_NO_EXTERNAL,
)
GIT_SHOW = _git(
    "git show",
    flags=_DIFF_FLAGS | _FORMAT_FLAGS,
    valued=_DIFF_VALUED,
    optional={**_DIFF_OPTIONAL, **_FORMAT_OPTIONAL},
    word_patterns=(_UNIFIED,),
    denied=_EXTERNAL_DENIED,
    inject=_NO_EXTERNAL,
)
GIT_DIFF = _git(
    "git diff",
    flags=_DIFF_FLAGS | {"--cached", "--staged"},
    valued=_DIFF_VALUED,
    optional=_DIFF_OPTIONAL,
    word_patterns=(_UNIFIED,),
    denied=_EXTERNAL_DENIED,
    inject=_NO_EXTERNAL,
)
GIT_BLAME = _git(
    "git blame",
    flags=option_set(
        "-b -c -e -f -l -M -n -p -s -t -w --root --show-name --show-number --show-email "
        "--porcelain --line-porcelain --minimal --incremental"
    ),
    valued={"-L": matching(r"[^:]*", "START,END (no file part)")},
    optional={
        "--date": _FORMAT_OPTIONAL["--date"],
        "--abbrev": NUM,
    },
    denied={
        "--contents": "reading another file is not allowed",
        "-S": "revision files are not allowed",
        "--ignore-revs-file": "revision files are not allowed",
    },
    inject=("--no-textconv",),
)
GIT_GREP = _git(
    "git grep",
    flags=option_set(
        "-a -c -E -F -G -h -H -i -I -l -L -n -o -p -v -w -W --text --count --extended-regexp "
        "--fixed-strings --basic-regexp --no-filename --ignore-case --files-with-matches "
        "--name-only --files-without-match --line-number --only-matching --invert-match "
        "--word-regexp --full-name --heading --break --show-function --function-context "
        "--cached --no-color --all-match --and --or --not --no-textconv"
    ),
    valued={
        "-e": any_value,
        "-m": NUM,
        "--max-count": NUM,
        "-A": NUM,
        "-B": NUM,
        "-C": NUM,
        "--after-context": NUM,
        "--before-context": NUM,
        "--context": NUM,
        "--max-depth": matching(r"-?\d+", "a number"),
    },
    optional={"--color": one_of("never")},
    word_patterns=NUMERIC_WORD,
    denied={
        "-O": "opening files in a pager starts another program",
        "--open-files-in-pager": "opening files in a pager starts another program",
        "--no-index": "searching outside the repository is not allowed",
        "-f": "pattern files are not allowed; give patterns with -e PATTERN",
        "--textconv": "textconv filters are not allowed",
    },
    pattern_options=frozenset({"-e"}),
    first_operand_is_pattern=True,
    inject=("--no-textconv",),
)
GIT_REV_LIST = _git(
    "git rev-list",
    flags=_REV_FLAGS | {"--count", "--parents", "--oneline", "--abbrev-commit"},
    valued=_REV_VALUED,
    optional={"--format": _git_format, "--pretty": _git_format},
    word_patterns=NUMERIC_WORD,
)
GIT_SHORTLOG = _git(
    "git shortlog",
    flags=option_set(
        "-s -n -e -c --summary --numbered --email --committer --no-merges --merges --reverse"
    ),
    # shortlog's -n is --numbered, not a count.
    valued={k: v for k, v in _REV_VALUED.items() if k not in ("-n", "--grep")},
    optional={"--format": _git_format},
    word_patterns=NUMERIC_WORD,
)
GIT_LS_FILES = _git(
    "git ls-files",
    flags=option_set(
        "-c -d -m -o -s -t -z --cached --deleted --modified --others --stage --full-name "
        "--exclude-standard --directory"
    ),
    optional={"--abbrev": NUM},
    denied={
        "-X": "reading exclude files is not allowed; use --exclude-standard",
        "--exclude-from": "reading exclude files is not allowed; use --exclude-standard",
        "--exclude-per-directory": "reading exclude files is not allowed",
    },
)
GIT_LS_TREE = _git(
    "git ls-tree",
    flags=option_set("-d -l -r -t -z --long --name-only --name-status --full-name --full-tree"),
    optional={"--abbrev": NUM},
)
GIT_CAT_FILE = _git(
    "git cat-file",
    flags=option_set("-p -t -s"),
    exactly_one_of=option_set("-p -t -s"),
    min_operands=1,
    max_operands=1,
)
GIT_REV_PARSE = _git(
    "git rev-parse",
    flags=option_set("-q --verify --quiet --abbrev-ref --symbolic --symbolic-full-name"),
    optional={"--short": NUM},
)

#: Read-only git subcommands, by name.
GIT_SUBCOMMANDS: Mapping[str, ProgramSpec] = MappingProxyType(
    {
        spec.name.split(" ", 1)[1]: spec
        for spec in (
            GIT_LOG,
            GIT_SHOW,
            GIT_DIFF,
            GIT_BLAME,
            GIT_GREP,
            GIT_REV_LIST,
            GIT_SHORTLOG,
            GIT_LS_FILES,
            GIT_LS_TREE,
            GIT_CAT_FILE,
            GIT_REV_PARSE,
        )
    }
)

#: Hints for git subcommands that are refused but often asked for.
GIT_SUBCOMMAND_HINTS: Mapping[str, str] = MappingProxyType(
    {"status": "it may write the index; use `git diff` or `git ls-files`"}
)
