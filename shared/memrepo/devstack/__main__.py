"""Command line: ``python -m memrepo.devstack up|down``.

``up`` starts the stack, prints ``export`` lines for the shell, optionally records every PID in a
JSON state file, and runs in the foreground until Ctrl-C, SIGTERM or SIGHUP (or until one of the
servers dies, exit status 1). ``down --state-file PATH`` stops a stack started elsewhere: it
sends SIGTERM to the ``up`` process, then stops any recorded server process still alive.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import Any

from memrepo.devstack.processes import (
    DevStackError,
    ManagedProcess,
    pid_alive,
    process_start_time,
    stop_process,
)
from memrepo.devstack.stack import Stack

_POLL_SECONDS = 0.5


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m memrepo.devstack", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    up = sub.add_parser("up", help="start the stack in the foreground until Ctrl-C")
    up.add_argument("--with-functions", action="store_true", help="also serve both functions")
    up.add_argument("--writer-source", type=Path, default=Path("functions/writer"))
    up.add_argument("--retrieval-source", type=Path, default=Path("functions/retrieval"))
    up.add_argument("--project", default="memrepo-local")
    up.add_argument("--bucket", default="memrepo-local")
    up.add_argument("--prefix", default="users")
    up.add_argument("--log-dir", type=Path, default=None, help="keep server logs here")
    up.add_argument("--state-file", type=Path, default=None, help="record PIDs (JSON) here")

    down = sub.add_parser("down", help="stop a stack recorded in a state file")
    down.add_argument("--state-file", type=Path, required=True)
    down.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for `up`")
    return parser


def _install_stop_handlers() -> None:
    """Turn SIGTERM and SIGHUP into KeyboardInterrupt once; ignore repeats during shutdown."""

    def handler(signum: int, frame: FrameType | None) -> None:
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, handler)


def _write_state(path: Path, stack: Stack) -> None:
    """Write the state file atomically (temp file, then rename)."""
    state: dict[str, Any] = {
        "supervisor": {"pid": os.getpid(), "start_time": process_start_time(os.getpid())},
        "processes": [p.to_record() for p in stack.processes],
        "env": stack.env(),
        "log_dir": str(stack.log_dir) if stack.log_dir else None,
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(state, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _up(args: argparse.Namespace) -> int:
    _install_stop_handlers()
    stack = Stack(
        project=args.project,
        bucket=args.bucket,
        prefix=args.prefix,
        writer=args.writer_source if args.with_functions else None,
        retrieval=args.retrieval_source if args.with_functions else None,
        log_dir=args.log_dir,
    )
    try:
        with stack:
            for key, value in stack.env().items():
                print(f"export {key}={shlex.quote(value)}")
            sys.stdout.flush()
            if args.state_file:
                _write_state(args.state_file, stack)
            print(
                f"# stack up in {stack.startup_seconds:.1f} s, logs in {stack.log_dir}; "
                "Ctrl-C stops it",
                file=sys.stderr,
            )
            while True:
                dead = [p for p in stack.processes if not p.is_running()]
                if dead:
                    for proc in dead:
                        print(f"{proc.name} exited:\n{proc.log_tail()}", file=sys.stderr)
                    return 1
                time.sleep(_POLL_SECONDS)
    except KeyboardInterrupt:
        return 0
    except DevStackError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.state_file:
            args.state_file.unlink(missing_ok=True)


def _down(args: argparse.Namespace) -> int:
    try:
        state = json.loads(args.state_file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        print(f"no state file {args.state_file}: nothing to stop", file=sys.stderr)
        return 1
    supervisor = state.get("supervisor") or {}
    sup_pid, sup_start = supervisor.get("pid"), supervisor.get("start_time")
    if sup_pid and pid_alive(sup_pid, sup_start):
        os.kill(sup_pid, signal.SIGTERM)
        deadline = time.monotonic() + args.timeout
        while pid_alive(sup_pid, sup_start) and time.monotonic() < deadline:
            time.sleep(0.1)
    status = 0
    for record in state.get("processes", []):
        proc = ManagedProcess.from_record(record)
        try:
            stop_process(proc)
        except DevStackError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 1
    args.state_file.unlink(missing_ok=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; return the exit status (0 on a clean stop)."""
    args = _parser().parse_args(argv)
    return _up(args) if args.command == "up" else _down(args)


if __name__ == "__main__":
    sys.exit(main())
