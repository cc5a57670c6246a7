"""Running the git CLI with a hardened environment.

Every git process memrepo starts goes through :func:`git`: no system or global configuration
(``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``, see git-config(1) "ENVIRONMENT"), no
hooks (``core.hooksPath=/dev/null``), no pager, no terminal prompts, no external diff or textconv,
no fsmonitor, and an environment emptied of everything else, so nothing from the host changes what
git does.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path

from memrepo.errors import GitError

#: ``-c`` options given before every subcommand (git(1) "-c <name>=<value>").
HARDENING_CONFIG: tuple[str, ...] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.quotePath=false",
    "core.autocrlf=false",
    "diff.noprefix=false",
    "gc.auto=0",
    "maintenance.auto=false",
    "advice.detachedHead=false",
    "init.defaultBranch=main",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "safe.directory=*",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "user.useConfigOnly=false",
)

#: Author and committer used for every memory commit.
IDENTITY = {
    "GIT_AUTHOR_NAME": "memrepo",
    "GIT_AUTHOR_EMAIL": "memrepo@localhost",
    "GIT_COMMITTER_NAME": "memrepo",
    "GIT_COMMITTER_EMAIL": "memrepo@localhost",
}


def hardened_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """Return a fresh environment for git: nothing inherited but ``PATH``.

    Args:
        extra: variables to add (for example ``GIT_AUTHOR_DATE``).

    Returns:
        A new dict; the process environment is not modified.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "LC_ALL": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_NO_REPLACE_OBJECTS": "1",
    }
    env.update(IDENTITY)
    if extra:
        env.update(extra)
    return env


def git_argv(args: Sequence[str]) -> list[str]:
    """Return the full argv for ``git <args>`` with the hardening ``-c`` options prepended."""
    argv = ["git"]
    for item in HARDENING_CONFIG:
        argv += ["-c", item]
    argv += list(args)
    return argv


def git(
    args: Sequence[str],
    cwd: Path,
    *,
    env: Mapping[str, str] | None = None,
    input: bytes | None = None,
    check: bool = True,
    timeout: float = 120.0,
) -> subprocess.CompletedProcess[bytes]:
    """Run ``git <args>`` in ``cwd`` and return the completed process (stdout/stderr as bytes).

    Args:
        args: git arguments, without the leading ``git``.
        cwd: working directory (a repository or the directory to create one in).
        env: extra environment variables on top of :func:`hardened_env`.
        input: bytes written to git's standard input.
        check: raise :class:`GitError` on a non-zero exit.
        timeout: wall-clock limit in seconds.

    Raises:
        GitError: git exited non-zero (with ``check``) or ran past ``timeout``.
    """
    argv = git_argv(args)
    try:
        proc = subprocess.run(
            argv,
            cwd=cwd,
            env=hardened_env(env),
            input=input,
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"git {args[0]} timed out after {timeout:.0f} s") from exc
    if check and proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        raise GitError(f"git {' '.join(args[:3])} failed ({proc.returncode}): {stderr[:500]}")
    return proc


def git_text(args: Sequence[str], cwd: Path, **kwargs: object) -> str:
    """Run git like :func:`git` and return its stdout decoded as UTF-8 (errors replaced)."""
    proc = git(args, cwd, **kwargs)  # type: ignore[arg-type]
    return proc.stdout.decode("utf-8", "replace")
