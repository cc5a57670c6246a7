"""An HTTP proxy on 127.0.0.1 that injects faults in front of a local server (fake-gcs-server).

Every request is forwarded unchanged except those a rule picks, which get an error status instead
(a 503 with ``Retry-After: 0``, a 429 ...), never reaching the server. Used to show that the Cloud
Storage adapter and the writer land every session through 5xx and 429 answers, as Cloud Storage
may give them (https://cloud.google.com/storage/docs/retry-strategy).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

#: Decides, from the request number (1-based), method and path, the status to inject (or None).
FaultRule = Callable[[int, str, str], int | None]


def every_nth(n: int, status: int) -> FaultRule:
    """Return a rule failing every ``n``-th request with ``status``."""
    return lambda number, method, path: status if number % n == 0 else None


class FaultProxy:
    """A threaded forwarding proxy; ``url`` is where clients should point (context manager)."""

    def __init__(self, upstream: str, rule: FaultRule) -> None:
        """Args:
        upstream: ``http://127.0.0.1:PORT`` of the real server.
        rule: which requests fail, and how.
        """
        target = urlsplit(upstream)
        self.upstream_host = target.hostname or "127.0.0.1"
        self.upstream_port = target.port or 80
        self.rule = rule
        self.requests = 0
        self.injected: dict[int, int] = {}
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib name
                """Silence the default stderr access log."""

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with proxy._lock:
                    proxy.requests += 1
                    number = proxy.requests
                status = proxy.rule(number, self.command, self.path)
                if status is not None:
                    with proxy._lock:
                        proxy.injected[status] = proxy.injected.get(status, 0) + 1
                    payload = b'{"error": {"code": %d, "message": "injected fault"}}' % status
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.send_header("Retry-After", "0")
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                conn = http.client.HTTPConnection(
                    proxy.upstream_host, proxy.upstream_port, timeout=60
                )
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                headers["Host"] = f"{proxy.upstream_host}:{proxy.upstream_port}"
                conn.request(self.command, self.path, body=body, headers=headers)
                answer = conn.getresponse()
                data = answer.read()
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in ("transfer-encoding", "content-length", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                conn.close()

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the proxy."""
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> FaultProxy:
        """Start serving in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
