"""Every line of a checkout that holds any of a set of terms, case-insensitively, with GNU grep.

The deterministic engine's first step. It runs one ``grep -r -n -H -I -i -F -Z -e T1 -e T2 ...``
(grep(1): ``-F`` fixed strings, ``-i`` case folding, ``-I`` skip binary files, ``-Z`` a NUL after
each file name) over the top-level entries of the work tree, ``.git`` and the excluded names left
out, symbolic links never followed (``-r``, not ``-R``; top-level links are not passed).

Why GNU grep and not ``git grep``: with several ``-i -F`` patterns git matches them one by one on
every line, GNU grep compiles all of them into one matcher. On a 1,000-session checkout (2.4 MB in
1,057 files, nine terms) that is about 12 ms against 33-46 ms for ``git grep`` (see
docs/benchmarks.md, section 2). The same ``grep`` binary already serves the agent's ``run`` tool.
The work tree must be a full checkout, as readers' are
(:meth:`memrepo.repocache.RepoCache.readable`); lines are the work tree's, committed or not.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import NamedTuple

from memrepo.errors import SearchFailed

#: Wall-clock limit of one search, in seconds.
GREP_TIMEOUT_S = 20.0


class LineHit(NamedTuple):
    """One matching line: ``path`` relative to the work tree, 1-based ``line``, its ``text``."""

    path: str
    line: int
    text: str


def grep_lines(
    root: Path,
    terms: Sequence[str],
    *,
    exclude: Collection[str] = (),
    timeout_s: float = GREP_TIMEOUT_S,
) -> list[LineHit]:
    """Return every line under ``root`` containing any of ``terms`` (case-insensitive substring).

    Args:
        root: the work tree (a full checkout).
        terms: fixed strings (not patterns); empty strings are ignored.
        exclude: top-level names left out (``index.md``).
        timeout_s: wall-clock limit in seconds.

    Returns:
        Hits sorted by path (code point order, as ``git grep`` lists them) then line number;
        text decoded as UTF-8 with errors replaced, without the newline.

    Raises:
        SearchFailed: grep exited with status 2 (an unreadable file, a bad option), was not
            found, or ran past ``timeout_s``.
    """
    patterns = [t for t in dict.fromkeys(terms) if t]
    entries = sorted(
        name for name in os.listdir(root)
        if name != ".git" and name not in exclude and not (root / name).is_symlink()
    )
    if not patterns or not entries:
        return []
    argv = ["grep", "-r", "-n", "-H", "-I", "-i", "-F", "-Z", "--exclude-dir=.git"]
    for term in patterns:
        argv += ["-e", term]
    argv += ["--", *entries]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C.UTF-8"}
    try:
        proc = subprocess.run(argv, cwd=root, env=env, capture_output=True, timeout=timeout_s,
                              check=False)
    except subprocess.TimeoutExpired as exc:
        raise SearchFailed(f"grep timed out after {timeout_s} s") from exc
    except OSError as exc:
        raise SearchFailed(f"grep could not start: {exc}") from exc
    if proc.returncode not in (0, 1):
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        raise SearchFailed(f"grep failed ({proc.returncode}): {stderr[:500]}")
    hits = []
    for row in proc.stdout.decode("utf-8", "replace").split("\n"):  # not splitlines(): \r, \f
        path, nul, rest = row.partition("\0")
        number, colon, text = rest.partition(":")
        if nul and colon and number.isdigit():
            hits.append(LineHit(path, int(number), text))
    hits.sort()  # by path, then line (then text: never needed, a line has one text)
    return hits
