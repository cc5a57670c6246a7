"""Builders shared by the sandbox tests: a real memory repository, snapshots, a recording executor.

Holds no tests itself; the ``test_sandbox_*`` modules import it by name (``tests/`` is on
``sys.path``, see ``conftest.py``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO

from memrepo.gitcli import HARDENING_CONFIG, git
from memrepo.sandbox.executor import Executor
from memrepo.sandbox.gitprograms import SANDBOX_GIT_CONFIG

#: (date, {path: content or None to delete}, message) for each commit of the fixture repository.
_HISTORY: tuple[tuple[str, dict[str, str], str], ...] = (
    (
        "2024-01-05T10:00:00+00:00",
        {
            "profile.md": "# Ana\n\nLives in Lisbon. Works as a nurse.\n",
            "index.md": "# Index\n\n- Sam (brother): memories/people/sam.md\n",
            "timeline/2024-01.md": "# 2024-01\n\n- 01-05: talked about Sam's new job\n",
            "memories/people/sam.md": "# Sam\n\nBrother. New job at the port.\n",
        },
        "session s1",
    ),
    (
        "2024-01-20T18:30:00+00:00",
        {
            "memories/people/zoë.md": "# Zoë\n\nFriend from school. Her birthday is 12 May.\n",
            "index.md": "# Index\n\n- Sam (brother): memories/people/sam.md\n"
            "- Zoë (friend): memories/people/zoë.md\n",
            "timeline/2024-01.md": "# 2024-01\n\n- 01-05: talked about Sam's new job\n"
            "- 01-20: Zoë's birthday plans\n",
        },
        "session s2",
    ),
    (
        "2024-03-02T09:15:00+00:00",
        {
            "timeline/2024-03.md": "# 2024-03\n\n- 03-02: Anna Maria visits\n",
            "memories/people/anna maria.md": "# Anna Maria\n\nAunt. Visits in March.\n",
            "memories/people/sam.md": "# Sam\n\nBrother. New job at the port.\n"
            "Birthday: 3 April.\n",
        },
        "session s3",
    ),
    (
        "2024-03-15T20:00:00+00:00",
        {
            "memories/people/sam.md": "# Sam\n\nBrother. New job at the port.\n"
            "Birthday: 3 April.\nKnee surgery planned for 20 March.\n",
            "timeline/2024-03.md": "# 2024-03\n\n- 03-02: Anna Maria visits\n"
            "- 03-15: Sam's surgery is on 20 March\n",
            "profile.md": "# Ana\n\nLives in Lisbon. Works as a nurse.\nLikes swimming.\n",
        },
        "session s4",
    ),
)


def build_memory_repo(root: Path) -> Path:
    """Create a user repository with real git: 5 commits, people, timeline, a symlink.

    The last commit adds ``notes.md``, a symbolic link to ``/etc/passwd``.

    Returns:
        ``root``, the working tree.
    """
    root.mkdir(parents=True)
    git(["init", "-q", "-b", "user/ana"], root)
    for date, files, message in _HISTORY:
        for rel, content in files.items():
            path = root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(content, encoding="utf-8")
        _commit(root, date, message)
    os.symlink("/etc/passwd", root / "notes.md")
    _commit(root, "2024-03-20T08:00:00+00:00", "session s5")
    return root


def _commit(root: Path, date: str, message: str) -> None:
    git(["add", "-A"], root)
    dates = {"GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    git(["commit", "-q", "-m", message, "--trailer", "Session-Id: x"], root, env=dates)


def build_long_history_repo(root: Path, commits: int) -> Path:
    """Create a repository of ``commits`` commits with ``git fast-import`` (a few seconds).

    The commits alternate between two versions of ``timeline/2024-01.md``, so every commit has a
    patch while the repository holds only two blobs and two trees.
    """
    root.mkdir(parents=True)
    git(["init", "-q", "-b", "user/ana"], root)
    chunks: list[bytes] = []
    for mark, version in ((1, "even"), (2, "odd")):
        content = "".join(f"- {version} entry {j}\n" for j in range(5)).encode()
        chunks.append(f"blob\nmark :{mark}\ndata {len(content)}\n".encode() + content + b"\n")
    for i in range(1, commits + 1):
        message = f"session {i}\n".encode()
        chunks.append(
            f"commit refs/heads/user/ana\nmark :{i + 2}\n"
            f"committer memrepo <m@l> {1_700_000_000 + i * 60} +0000\n"
            f"data {len(message)}\n".encode()
            + message
            + (f"from :{i + 1}\n".encode() if i > 1 else b"")
            + f"M 100644 :{1 + i % 2} timeline/2024-01.md\n\n".encode()
        )
    git(["fast-import", "--quiet"], root, input=b"".join(chunks))
    git(["checkout", "-q", "-f", "user/ana"], root)
    return root


def snapshot(root: Path) -> dict[str, tuple[object, ...]]:
    """Every path under ``root`` (``.git`` included) with its type, size, mtime and content hash."""
    state: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            if os.path.islink(path):
                digest: object = os.readlink(path)
            elif os.path.isfile(path):
                digest = hashlib.sha256(Path(path).read_bytes()).hexdigest()
            else:
                digest = None
            state[os.path.relpath(path, root)] = (st.st_mode, st.st_size, st.st_mtime_ns, digest)
    return state


def pwned_files(tree: Path) -> list[str]:
    """Files named ``pwned*`` (the marker the hostile cases try to create) anywhere under
    ``tree`` or directly in the test process's working directory."""
    found = [str(p) for p in Path.cwd().glob("pwned*")]
    for dirpath, _dirnames, filenames in os.walk(tree):
        found += [os.path.join(dirpath, f) for f in filenames if f.startswith("pwned")]
    return found


def live_processes_in_groups(pgids: Sequence[int]) -> list[int]:
    """Pids of live processes whose process group is one of ``pgids``.

    Zombies do not count: they have ended. (Killed grandchildren are re-parented to pid 1, and
    some container inits never reap them.)
    """
    wanted = set(pgids)
    live = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # state, ppid, pgrp, ...
        if int(fields[2]) in wanted and fields[0] not in ("Z", "X"):
            live.append(int(entry))
    return live


def reference_shell_env() -> dict[str, str]:
    """The environment for running a command in a real sh with the same git settings as the
    sandbox (hardening and sandbox ``-c`` options passed as ``GIT_CONFIG_*`` variables)."""
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "LC_ALL": "C.UTF-8",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_PAGER": "cat",
    }
    # An empty diff.external makes a plain `git diff` try to run "" (the sandbox always passes
    # --no-ext-diff, which ignores it); leave it out of the reference.
    settings = [c for c in (*HARDENING_CONFIG, *SANDBOX_GIT_CONFIG) if c != "diff.external="]
    env["GIT_CONFIG_COUNT"] = str(len(settings))
    for i, item in enumerate(settings):
        key, _, value = item.partition("=")
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def run_in_shell(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run ``command`` with ``sh -c`` (the reference the sandbox must match)."""
    # shell=True is the point: the reference behaviour, on trusted test input only.
    return subprocess.run(  # noqa: S602
        command,
        shell=True,
        cwd=cwd,
        env=reference_shell_env(),
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


class RecordingExecutor(Executor):
    """An executor that records the argv and pid of every program it starts, then starts it."""

    def __init__(self) -> None:
        super().__init__()
        self.argvs: list[list[str]] = []
        self.pids: list[int] = []

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: int | IO[bytes],
        stderr: int,
    ) -> subprocess.Popen[bytes]:
        self.argvs.append(list(argv))
        proc = super().spawn(argv, cwd=cwd, env=env, stdin=stdin, stderr=stderr)
        self.pids.append(proc.pid)
        return proc
