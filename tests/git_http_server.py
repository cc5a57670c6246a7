"""A git smart-HTTP remote on 127.0.0.1 for tests: ``git http-backend`` behind Basic auth.

Stands in for GitHub: repositories are bare repos under ``root``; every request must carry
``Authorization: Basic base64(<user>:<token>)`` or gets 401. The headers each request carried are
kept (``requests``) so a test can check the token arrived only as a header.
"""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

BACKEND = "/usr/lib/git-core/git-http-backend"


class GitHttpServer:
    """Serve bare repositories under ``root`` over smart HTTP (use as a context manager)."""

    def __init__(self, root: Path, token: str, username: str = "x-access-token") -> None:
        self.root = root
        self.expected = "Basic " + base64.b64encode(f"{username}:{token}".encode()).decode()
        self.requests: list[dict[str, str]] = []
        self.refused = 0
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                return

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    data = b""
                    while True:
                        size = int(self.rfile.readline().strip(), 16)
                        if size == 0:
                            self.rfile.readline()
                            return data
                        data += self.rfile.read(size)
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _serve(self) -> None:
                server.requests.append({"path": self.path, **dict(self.headers)})
                body = self._body()
                if self.headers.get("Authorization") != server.expected:
                    server.refused += 1
                    self.send_response(401)
                    self.send_header("WWW-Authenticate", 'Basic realm="git"')
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                path, _, query = self.path.partition("?")
                env = {
                    "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
                    "GIT_PROJECT_ROOT": str(server.root),
                    "GIT_HTTP_EXPORT_ALL": "1",
                    "REMOTE_USER": "tester",
                    "REQUEST_METHOD": self.command,
                    "PATH_INFO": path,
                    "QUERY_STRING": query,
                    "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                    "CONTENT_LENGTH": str(len(body)),
                    "GIT_CONFIG_NOSYSTEM": "1",
                    "HOME": str(server.root),
                }
                proc = subprocess.run([BACKEND], input=body, env=env, capture_output=True,
                                      check=False, timeout=60)
                head, _, payload = proc.stdout.partition(b"\r\n\r\n")
                status = 200
                headers = []
                for line in head.decode("latin-1").split("\r\n"):
                    key, _, value = line.partition(":")
                    if key.lower() == "status":
                        status = int(value.strip().split()[0])
                    elif key:
                        headers.append((key, value.strip()))
                self.send_response(status)
                for key, value in headers:
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = _serve  # noqa: N815 - http.server's naming
            do_POST = _serve  # noqa: N815

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def create_repo(self, name: str) -> Path:
        """Create an empty bare repository ``root/<name>`` and return its path."""
        path = self.root / name
        subprocess.run(["git", "init", "-q", "--bare", str(path)], check=True)
        return path

    def __enter__(self) -> GitHttpServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
