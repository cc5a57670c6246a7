"""A Cloud Function served locally by ``functions-framework`` in a child process.

functions-framework serves through gunicorn (one master, one worker in the same process group);
stopping the group stops both. The ``memrepo`` package this module was imported from is put on
the child's ``PYTHONPATH``, so a function's ``main.py`` can ``import memrepo`` without an install.

Pub/Sub push to a ``cloudevent`` function: functions-framework turns the push body
``{"message": {...}, "subscription": ...}`` into a CloudEvent with type
``google.cloud.pubsub.topic.v1.messagePublished``, source ``//pubsub.googleapis.com/<path>``
(``<path>`` is ``projects/P/topics/T`` found in the request URL, else empty), id = messageId,
time = publishTime, and data ``{"message": {"@type", "data", "attributes", "messageId",
"publishTime"}}``: ``subscription`` and the emulator's snake_case duplicates (``message_id``,
``publish_time``) are dropped (the emulator sends no ``deliveryAttempt``). A push body whose
message lacks ``data`` or ``messageId`` cannot be converted (400, so it is retried and
dead-lettered); the emulator sends ``"data": ""`` for an empty payload.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from memrepo.devstack.processes import (
    DevStackError,
    ManagedProcess,
    free_port,
    spawn,
    stop_process,
    wait_for_port,
)

__all__ = ["FunctionServer", "FunctionSpec", "functions_framework_executable"]

SignatureType = Literal["http", "cloudevent", "event", "typed"]


def functions_framework_executable() -> Path:
    """Return the ``functions-framework`` script of this interpreter's environment.

    Looks next to ``sys.executable`` first (the venv), then on ``PATH``.

    Raises:
        DevStackError: If functions-framework is not installed.
    """
    local = Path(sys.executable).parent / "functions-framework"
    if local.is_file():
        return local
    found = shutil.which("functions-framework")
    if found is None:
        raise DevStackError("functions-framework is not installed in this environment")
    return Path(found)


def _package_root() -> Path:
    """Return the directory holding the ``memrepo`` package (``shared/`` in a checkout)."""
    return Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class FunctionSpec:
    """What to serve.

    Attributes:
        target: Name of the function in the source file (``on_session_ended``).
        source: The source file, or a directory holding ``main.py``.
        signature_type: ``cloudevent`` for Pub/Sub triggers, ``http`` for HTTP functions.
        env: Variables added to the inherited environment of the server.
    """

    target: str
    source: Path
    signature_type: SignatureType = "http"
    env: Mapping[str, str] = field(default_factory=dict)

    @property
    def source_file(self) -> Path:
        """The Python file to load (``source`` itself, or ``source/main.py``)."""
        path = Path(self.source)
        return path / "main.py" if path.is_dir() else path


class FunctionServer:
    """``functions-framework`` serving one function on ``127.0.0.1``.

    Attributes:
        spec: The function served.
        host: Interface bound (``127.0.0.1``).
        port: TCP port.
        process: The running process after :meth:`spawn`, else None.
    """

    def __init__(
        self,
        spec: FunctionSpec,
        *,
        port: int | None = None,
        log_path: Path | None = None,
        name: str | None = None,
        inherit_env: bool = True,
        executable: Path | None = None,
        add_package_path: bool = True,
    ) -> None:
        """Prepare (do not start) a server.

        Args:
            spec: Function to serve.
            port: TCP port; None picks a free one.
            log_path: File for the server's output; None discards it.
            name: Process label; defaults to ``function:<target>``.
            inherit_env: Start from this process's environment (else from ``PATH`` only).
            executable: The ``functions-framework`` script to run (default: this venv's).
            add_package_path: Put this checkout's ``shared/`` on ``PYTHONPATH`` (False to serve
                an unpacked archive that carries its own ``memrepo`` package).
        """
        self.spec = spec
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.log_path = log_path
        self.name = name or f"function:{spec.target}"
        self.inherit_env = inherit_env
        self.executable = executable
        self.add_package_path = add_package_path
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` of the function."""
        return f"http://{self.host}:{self.port}"

    def environment(self) -> dict[str, str]:
        """Return the child's environment: base, then ``spec.env``, then ``PYTHONPATH``."""
        env = dict(os.environ) if self.inherit_env else {"PATH": os.environ.get("PATH", "")}
        env.update(self.spec.env)
        if not self.add_package_path:
            env.pop("PYTHONPATH", None)
            env.setdefault("PYTHONUNBUFFERED", "1")
            return env
        paths = [str(_package_root())] + [
            p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p
        ]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env.setdefault("PYTHONUNBUFFERED", "1")
        return env

    def spawn(self) -> ManagedProcess:
        """Start functions-framework without waiting for it.

        Raises:
            DevStackError: If the source file does not exist.
        """
        source = self.spec.source_file.resolve()
        if not source.is_file():
            raise DevStackError(f"{self.name}: function source {source} does not exist")
        argv = [
            str(self.executable or functions_framework_executable()),
            "--target", self.spec.target,
            "--source", str(source),
            "--signature-type", self.spec.signature_type,
            "--host", self.host,
            "--port", str(self.port),
        ]  # fmt: skip
        self.process = spawn(
            self.name, argv, log_path=self.log_path, env=self.environment(), cwd=source.parent
        )
        return self.process

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait until the port accepts TCP connections (the function module is loaded by then).

        Args:
            timeout: Limit in seconds.

        Raises:
            ProcessStartError: If the server exits (e.g. an import error) or is not ready in time.
        """
        wait_for_port(self.host, self.port, timeout=timeout, process=self.process)

    def start(self, timeout: float = 30.0) -> FunctionServer:
        """Spawn the server and wait until it is ready."""
        self.spawn()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop gunicorn's master and workers; a no-op if not running."""
        if self.process is not None:
            stop_process(self.process, timeout=timeout)
            self.process = None

    def __enter__(self) -> FunctionServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
