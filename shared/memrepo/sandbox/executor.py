"""Running accepted pipelines: argv lists, no shell, one wall-clock limit, one output cap.

Each program starts in its own session (so its whole process group can be killed), with an
emptied environment, ``/dev/null`` as the first stage's standard input and a pipe between stages.
All stages of a pipeline share one standard-error pipe, appended after the pipeline's standard
output. When the cap or the deadline is reached every process group is killed with ``SIGKILL``;
whatever happens, every process is reaped before :meth:`Executor.run` returns.
"""

from __future__ import annotations

import os
import resource
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from memrepo.gitcli import hardened_env
from memrepo.sandbox.policy import PlannedPipeline, Stage
from memrepo.sandbox.result import TIMEOUT_EXIT_CODE

#: A ``TMPDIR`` that does not exist: a program that wants a temporary file (``sort`` spilling a
#: large input) fails instead of writing outside the repository.
NO_TMPDIR = "/nonexistent/tmp"
_READ_CHUNK = 65_536
#: How long to wait, in seconds, for killed descendants (not our children) to die.
_GROUP_GRACE_S = 1.0


@dataclass(frozen=True)
class Outcome:
    """What running a plan produced.

    Attributes:
        output: the bytes the model sees (at most the cap; notes are added by the caller).
        truncated: output was dropped at the cap and the command stopped there.
        timed_out: the deadline was reached and the command stopped there.
        exit_code: the last pipeline's status (128 + N when killed by signal N, 127 when a
            program could not start, :data:`~memrepo.sandbox.result.TIMEOUT_EXIT_CODE` on
            timeout).
    """

    output: bytes
    truncated: bool
    timed_out: bool
    exit_code: int


def stage_env(stage: Stage) -> dict[str, str]:
    """Return the environment a stage runs with: nothing inherited but a ``PATH``.

    git gets :func:`memrepo.gitcli.hardened_env`; other programs only ``PATH``, ``LC_ALL`` and
    :data:`NO_TMPDIR`. ``PATH`` keeps only absolute entries, so no directory relative to the
    repository (``.`` or an empty entry) is ever searched for a program.
    """
    env = hardened_env({"TMPDIR": NO_TMPDIR})
    path = ":".join(entry for entry in env["PATH"].split(":") if os.path.isabs(entry))
    if stage.program == "git":
        env["PATH"] = path
        return env
    return {"PATH": path, "LC_ALL": "C.UTF-8", "TMPDIR": NO_TMPDIR}


class Executor:
    """Runs planned pipelines under limits. Subclass and override :meth:`spawn` to observe it.

    Args:
        memory_limit_bytes: address-space limit (``RLIMIT_AS``, bytes) set on every program but
            git right after it starts, so a runaway regular expression fails instead of eating the
            instance's memory; ``None`` for no limit. git is left alone: it maps pack files and
            threads' arenas into large address ranges without using the memory.
    """

    def __init__(self, *, memory_limit_bytes: int | None = 1 << 30) -> None:
        self._memory_limit = memory_limit_bytes

    def spawn(
        self,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdin: int | IO[bytes],
        stderr: int,
    ) -> subprocess.Popen[bytes]:
        """Start one program in a new session with its standard output on a new pipe.

        Args:
            argv: the argument vector; ``argv[0]`` is looked up in ``env["PATH"]``.
            cwd: the working directory (the repository root).
            env: the complete environment.
            stdin: ``subprocess.DEVNULL`` or the previous stage's output pipe.
            stderr: the write end of the pipeline's shared standard-error pipe.

        Returns:
            The started process.

        Raises:
            OSError: the program could not be started.
        """
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
            close_fds=True,
        )

    def run(
        self,
        plan: Sequence[PlannedPipeline],
        *,
        cwd: Path,
        timeout_s: float,
        max_output_bytes: int,
    ) -> Outcome:
        """Run the pipelines in order with ``;``, ``&&`` and ``||`` semantics.

        Args:
            plan: the accepted pipelines (see :meth:`memrepo.sandbox.policy.Policy.plan`).
            cwd: the repository root every program runs in.
            timeout_s: wall-clock limit for the whole plan, in seconds.
            max_output_bytes: cap on the bytes of output kept, all pipelines together.

        Returns:
            The output and how the run ended. Errors of the programs are part of the output.
        """
        deadline = time.monotonic() + timeout_s
        output = bytearray()
        status = 0
        for pipeline in plan:
            if (pipeline.connector == "&&" and status != 0) or (
                pipeline.connector == "||" and status == 0
            ):
                continue
            outcome = self._run_pipeline(
                pipeline.stages, cwd, deadline, max_output_bytes - len(output)
            )
            output += outcome.output
            status = outcome.exit_code
            if outcome.truncated or outcome.timed_out:
                return Outcome(bytes(output), outcome.truncated, outcome.timed_out, status)
        return Outcome(bytes(output), False, False, status)

    def _run_pipeline(
        self, stages: Sequence[Stage], cwd: Path, deadline: float, budget: int
    ) -> Outcome:
        procs: list[subprocess.Popen[bytes]] = []
        err_read, err_write = os.pipe()
        try:
            stdin: int | IO[bytes] = subprocess.DEVNULL
            try:
                for stage in stages:
                    proc = self.spawn(
                        stage.argv, cwd=cwd, env=stage_env(stage), stdin=stdin, stderr=err_write
                    )
                    procs.append(proc)
                    if stage.program != "git":
                        self._limit_memory(proc.pid)
                    if not isinstance(stdin, int):
                        stdin.close()
                    assert proc.stdout is not None
                    stdin = proc.stdout
            except OSError as exc:
                if not isinstance(stdin, int):
                    stdin.close()
                _kill_groups(procs)
                message = f"{stage.program}: cannot start: {exc.strerror or exc}\n"
                return Outcome(message.encode()[: max(budget, 0)], False, False, 127)
            finally:
                os.close(err_write)
            output, truncated, timed_out = _collect(procs, err_read, deadline, budget)
        finally:
            _reap(procs)
            os.close(err_read)
        if timed_out:
            return Outcome(output, truncated, True, TIMEOUT_EXIT_CODE)
        returncode = procs[-1].returncode
        assert returncode is not None
        return Outcome(output, truncated, False, 128 - returncode if returncode < 0 else returncode)

    def _limit_memory(self, pid: int) -> None:
        if self._memory_limit is None:
            return
        try:
            resource.prlimit(pid, resource.RLIMIT_AS, (self._memory_limit, self._memory_limit))
        except (ProcessLookupError, PermissionError):
            pass  # it has already exited


def _collect(
    procs: Sequence[subprocess.Popen[bytes]], err_read: int, deadline: float, budget: int
) -> tuple[bytes, bool, bool]:
    """Read the last stage's output and the shared error pipe until EOF, the cap or the deadline.

    Returns:
        The output (standard output, then standard error, cut at ``budget`` bytes), whether it
        was truncated and whether the deadline passed. On either, every group has been killed.
    """
    last_out = procs[-1].stdout
    assert last_out is not None
    chunks: dict[int, list[bytes]] = {last_out.fileno(): [], err_read: []}
    size = 0
    truncated = timed_out = False
    with selectors.DefaultSelector() as selector:
        for fd in chunks:
            selector.register(fd, selectors.EVENT_READ)
        while selector.get_map() and not truncated:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            for key, _ in selector.select(remaining):
                chunk = os.read(key.fd, _READ_CHUNK)
                if not chunk:
                    selector.unregister(key.fd)
                    continue
                chunks[key.fd].append(chunk)
                size += len(chunk)
            truncated = size > budget
    if not (truncated or timed_out):
        timed_out = not _wait_for_exit(procs, deadline)
    if truncated or timed_out:
        _kill_groups(procs)
    output = b"".join(chunks[last_out.fileno()]) + b"".join(chunks[err_read])
    return (output[: max(budget, 0)] if truncated else output), truncated, timed_out


def _has_exited(pid: int) -> bool:
    """Whether a child has exited, without reaping it (so its process group id stays ours)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _wait_for_exit(procs: Sequence[subprocess.Popen[bytes]], deadline: float) -> bool:
    """Wait until every process has exited or the deadline passes; return whether all exited."""
    pending = [proc.pid for proc in procs if proc.returncode is None]
    pause = 0.0005
    while pending:
        pending = [pid for pid in pending if not _has_exited(pid)]
        remaining = deadline - time.monotonic()
        if pending and remaining <= 0:
            return False
        if pending:
            time.sleep(min(pause, remaining))
            pause = min(pause * 2, 0.02)
    return True


def _kill_groups(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Send ``SIGKILL`` to the process group of every process not yet reaped."""
    for proc in procs:
        if proc.returncode is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


def _reap(procs: Sequence[subprocess.Popen[bytes]]) -> None:
    """Kill what is left of each process group, wait for each process and close its pipe.

    A process that exited stays a zombie until waited for, so its group id cannot be reused
    before the ``SIGKILL`` reaches any descendant still in the group. Descendants are not our
    children: after the leaders are reaped, wait (at most :data:`_GROUP_GRACE_S`) until no live
    process is left in any group.
    """
    _kill_groups(procs)
    for proc in procs:
        proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
    deadline = time.monotonic() + _GROUP_GRACE_S
    pending = [proc.pid for proc in procs]
    pause = 0.0005
    while pending:
        pending = [pgid for pgid in pending if _group_alive(pgid)]
        if not pending or time.monotonic() >= deadline:
            return
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _group_alive(pgid: int) -> bool:
    """Whether a process group still has a member that is not a zombie."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False  # empty (or the number now belongs to someone else's group)
    # Killed descendants are re-parented to pid 1 and stay zombies until it reaps them.
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()  # state, ppid, pgrp, ...
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False
