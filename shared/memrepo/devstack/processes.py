"""Start, wait for and stop the local stack's server processes by PID.

Every server is started in its own session (``start_new_session=True``), so its PID is also its
process-group id and one ``killpg`` reaches the launcher, whatever it ``exec``-ed (the Pub/Sub
emulator's shell launcher becomes ``java``) and whatever it forked (gunicorn workers under
functions-framework). A process is identified by its PID *and* its start time (from
``/proc/PID/stat``), so a recorded PID that the kernel has since reused is never signalled.

Nothing here imports ``google.cloud``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memrepo.errors import MemrepoError

__all__ = [
    "DevStackError",
    "ManagedProcess",
    "ProcessStartError",
    "ProcessStopError",
    "free_port",
    "group_members",
    "pid_alive",
    "process_start_time",
    "spawn",
    "stop_process",
    "wait_for_http",
    "wait_for_port",
]

_PROC = Path("/proc")


class DevStackError(MemrepoError):
    """Raised when the local development stack cannot be started, wired or stopped."""


class ProcessStartError(DevStackError):
    """Raised when a server exits during startup or is not ready before its timeout."""


class ProcessStopError(DevStackError):
    """Raised when processes of a stopped server are still alive after SIGKILL."""


@dataclass
class ManagedProcess:
    """A server process started in its own session (its PID is its process-group id).

    Attributes:
        name: Short label used in logs, errors and state files (``pubsub-emulator``...).
        pid: Process id of the session leader; also its process-group id.
        argv: The command line it was started with.
        log_path: File receiving its stdout and stderr, or None.
        start_time: Start time in clock ticks since boot (``/proc/PID/stat`` field 22), or None
            where ``/proc`` is unavailable. Guards against signalling a reused PID.
        popen: The ``Popen`` object when this process started it (used to reap it), else None.
    """

    name: str
    pid: int
    argv: list[str]
    log_path: Path | None = None
    start_time: int | None = None
    popen: subprocess.Popen[bytes] | None = field(default=None, repr=False, compare=False)

    def is_running(self) -> bool:
        """Return True while the process (not a zombie, not a reused PID) is alive."""
        if self.popen is not None and self.popen.poll() is not None:
            return False
        return pid_alive(self.pid, self.start_time)

    def log_tail(self, lines: int = 40) -> str:
        """Return the last ``lines`` lines of the log file ('' when there is none)."""
        if self.log_path is None or not self.log_path.exists():
            return ""
        text = self.log_path.read_text(encoding="utf-8", errors="replace")
        return "\n".join(text.splitlines()[-lines:])

    def to_record(self) -> dict[str, Any]:
        """Return a JSON-serialisable record (for state files); ``popen`` is dropped."""
        return {
            "name": self.name,
            "pid": self.pid,
            "argv": list(self.argv),
            "log_path": str(self.log_path) if self.log_path else None,
            "start_time": self.start_time,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ManagedProcess:
        """Rebuild a process handle from :meth:`to_record` output (without ``popen``)."""
        log_path = record.get("log_path")
        return cls(
            name=str(record["name"]),
            pid=int(record["pid"]),
            argv=[str(a) for a in record.get("argv", [])],
            log_path=Path(log_path) if log_path else None,
            start_time=record.get("start_time"),
        )


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on ``host`` a moment ago (bind to port 0, then close).

    Args:
        host: Interface address to probe.

    Returns:
        A port number; another process may still take it before the caller binds it.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _read_stat(pid: int) -> list[str] | None:
    """Return the fields of ``/proc/PID/stat`` after the command name, or None if gone.

    Index 0 is field 3 (state), 1 is the ppid, 2 the process group, 19 the start time.
    """
    try:
        raw = (_PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may itself contain spaces or ')'.
    return raw[raw.rfind(")") + 2 :].split()


def process_start_time(pid: int) -> int | None:
    """Return the start time of ``pid`` in clock ticks since boot, or None if unknown or gone."""
    fields = _read_stat(pid)
    if fields is None or len(fields) < 20:
        return None
    return int(fields[19])


def pid_alive(pid: int, start_time: int | None = None) -> bool:
    """Return True if ``pid`` runs, is not a zombie and (if given) started at ``start_time``.

    Args:
        pid: Process id.
        start_time: Expected start time in clock ticks since boot; a mismatch means the PID was
            reused by another process, which counts as "not alive".
    """
    if _PROC.is_dir():
        fields = _read_stat(pid)
        if fields is None or fields[0] in ("Z", "X"):
            return False
        return start_time is None or (len(fields) >= 20 and int(fields[19]) == start_time)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_members(pgid: int) -> set[int]:
    """Return the PIDs of live processes in process group ``pgid`` (empty without ``/proc``)."""
    members: set[int] = set()
    if not _PROC.is_dir():
        return members
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _read_stat(int(entry.name))
        if fields and len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            members.add(int(entry.name))
    return members


def spawn(
    name: str,
    argv: Sequence[str],
    *,
    log_path: Path | None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ManagedProcess:
    """Start ``argv`` in a new session with stdin closed and output appended to ``log_path``.

    Args:
        name: Label for the process.
        argv: Command and arguments (no shell).
        log_path: File for stdout and stderr; None discards the output.
        env: Complete environment for the child; None inherits this process's environment.
        cwd: Working directory for the child.

    Returns:
        The handle of the running process.

    Raises:
        ProcessStartError: If the executable cannot be started.
    """
    argv = [str(a) for a in argv]
    log = open(log_path, "ab") if log_path is not None else None
    try:
        popen = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log if log is not None else subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            cwd=cwd,
            start_new_session=True,
            close_fds=True,
        )
    except OSError as exc:
        raise ProcessStartError(f"{name}: cannot start {argv[0]!r}: {exc}") from exc
    finally:
        if log is not None:
            log.close()
    return ManagedProcess(
        name=name,
        pid=popen.pid,
        argv=argv,
        log_path=log_path,
        start_time=process_start_time(popen.pid),
        popen=popen,
    )


def _wait_until(
    ready: Callable[[], bool],
    *,
    what: str,
    timeout: float,
    process: ManagedProcess | None,
    interval: float = 0.1,
) -> None:
    """Poll ``ready`` every ``interval`` seconds until it is True, ``process`` exits or timeout.

    Raises:
        ProcessStartError: If ``process`` exits first or ``timeout`` seconds pass.
    """
    deadline = time.monotonic() + timeout
    while True:
        if ready():
            return
        if process is not None and not process.is_running():
            raise ProcessStartError(
                f"{process.name} (pid {process.pid}) exited before {what} was ready; "
                f"log {process.log_path}:\n{process.log_tail()}"
            )
        if time.monotonic() >= deadline:
            tail = f"; log {process.log_path}:\n{process.log_tail()}" if process else ""
            raise ProcessStartError(f"{what} not ready after {timeout:.0f} s{tail}")
        time.sleep(interval)


def wait_for_http(
    url: str,
    *,
    timeout: float,
    process: ManagedProcess | None = None,
    expect_status: int = 200,
    expect_body: bytes | None = None,
) -> None:
    """Wait until ``GET url`` answers ``expect_status`` (and, if given, exactly ``expect_body``).

    Args:
        url: The ``http://`` URL to poll (each attempt times out after 2 seconds).
        timeout: Overall limit in seconds.
        process: Server being waited for; its early exit ends the wait with an error.
        expect_status: HTTP status that means ready.
        expect_body: Body that means ready (compared after stripping whitespace), or None.

    Raises:
        ProcessStartError: If the server exits or is not ready within ``timeout`` seconds.
    """

    def ready() -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:  # noqa: S310 (http URL we built)
                status, body = resp.status, resp.read()
        except urllib.error.HTTPError as exc:
            status, body = exc.code, b""
        except (OSError, ValueError):
            return False
        return status == expect_status and (expect_body is None or body.strip() == expect_body)

    _wait_until(ready, what=url, timeout=timeout, process=process)


def wait_for_port(
    host: str, port: int, *, timeout: float, process: ManagedProcess | None = None
) -> None:
    """Wait until a TCP connection to ``host:port`` succeeds.

    Args:
        host: Address to connect to.
        port: TCP port.
        timeout: Overall limit in seconds.
        process: Server being waited for; its early exit ends the wait with an error.

    Raises:
        ProcessStartError: If the server exits or the port is closed after ``timeout`` seconds.
    """

    def ready() -> bool:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            return False

    _wait_until(ready, what=f"{host}:{port}", timeout=timeout, process=process)


def _signal_all(pgid: int, pids: set[int], sig: signal.Signals) -> None:
    """Send ``sig`` to process group ``pgid`` and to each of ``pids`` (ignoring gone ones)."""
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _wait_gone(proc: ManagedProcess, pids: set[int], timeout: float) -> set[int]:
    """Reap ``proc`` and wait up to ``timeout`` seconds for ``pids``; return the survivors."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.popen is not None:
            proc.popen.poll()
        alive = {p for p in pids if pid_alive(p)}
        if proc.is_running():
            alive.add(proc.pid)
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def stop_process(proc: ManagedProcess, *, timeout: float = 10.0, kill_timeout: float = 5.0) -> None:
    """Stop ``proc`` and every process in its process group: SIGTERM, then SIGKILL.

    Does nothing if the process is already gone, or if its PID now belongs to another process
    (start time mismatch).

    Args:
        proc: The session leader to stop.
        timeout: Seconds to wait after SIGTERM before sending SIGKILL.
        kill_timeout: Seconds to wait after SIGKILL.

    Raises:
        ProcessStopError: If some process of the group is still alive after SIGKILL.
    """
    if proc.popen is not None:
        proc.popen.poll()
    if pid_alive(proc.pid) and not proc.is_running():
        return  # the PID now belongs to another process: its group is not ours
    # While any member lives the kernel does not reuse the group id, so these are ours: the
    # leader and what it forked, including orphans left behind by a leader that already died.
    pids = group_members(proc.pid)
    if proc.is_running():
        pids.add(proc.pid)
    if not pids:
        return
    _signal_all(proc.pid, pids, signal.SIGTERM)
    alive = _wait_gone(proc, pids, timeout)
    if alive:
        _signal_all(proc.pid, alive | group_members(proc.pid), signal.SIGKILL)
        alive = _wait_gone(proc, alive, kill_timeout)
    if alive:
        raise ProcessStopError(f"{proc.name}: processes {sorted(alive)} survived SIGKILL")
