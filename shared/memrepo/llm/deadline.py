"""A wall-clock deadline on every socket operation of the LLM client, not only between bytes.

HTTP read timeouts in httpx/httpcore apply to each ``recv``: an endpoint that trickles its answer
(a byte every few seconds) never trips them, so one call could outlast the retrieval deadline by
far. Here the SDK's HTTP client gets a network backend whose streams clamp the timeout of every
connect, TLS handshake, read and write to the time left before the deadline of the call in
progress, and raise the HTTP library's own ``ConnectTimeout``/``ReadTimeout``/``WriteTimeout``
once it has passed; the SDK turns that into ``openai.APITimeoutError`` like any other timeout.

The deadline is per call and per thread (a :class:`contextvars.ContextVar`, set by
:func:`bounded`), so concurrent calls on one client do not share it. The backend is installed
into the pool of the SDK's default client (``openai.DefaultHttpxClient``: the SDK's own limits
and timeouts), whose ``_transport._pool._network_backend`` (httpx/httpcore and httpx2/httpcore2
alike) is not a public attribute: :func:`deadline_http_client` raises at start-up if it is gone,
and the trickle tests of ``tests/test_llm_client.py`` and ``tests/test_retrieval_agent_http.py``
prove the bound against a server sending a byte at a time.

Not bounded: the host name's DNS resolution inside ``socket.create_connection`` (no timeout in
the standard library), and a connect that tries several addresses in turn, each with the time
left; a connect that ends past the deadline is refused right after (``ConnectTimeout``).
"""

from __future__ import annotations

import contextvars
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: ``time.monotonic()`` instant after which no socket operation of this call may wait.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "memrepo_llm_deadline", default=None
)


@contextmanager
def bounded(seconds: float | None) -> Iterator[None]:
    """Bound every socket wait of the HTTP calls made inside to ``seconds`` from now in total.

    Args:
        seconds: the time allowed, in seconds; ``None`` leaves the per-operation timeouts alone.
    """
    token = _DEADLINE.set(None if seconds is None else time.monotonic() + seconds)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


class _Clamp:
    """Clamps per-operation timeouts to the current call's deadline."""

    def __init__(self, errors: Any) -> None:
        self.errors = errors  # the httpcore (or httpcore2) module, for its exception classes

    def __call__(self, timeout: float | None, error: str) -> float | None:
        deadline = _DEADLINE.get()
        if deadline is None:
            return timeout
        left = deadline - time.monotonic()
        if left <= 0:
            raise getattr(self.errors, error)("the call's deadline has passed")
        return left if timeout is None else min(timeout, left)


class _DeadlineStream:
    """A network stream whose every wait ends at the deadline (duck-types ``NetworkStream``)."""

    def __init__(self, inner: Any, clamp: _Clamp) -> None:
        self._inner = inner
        self._clamp = clamp

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data: bytes = self._inner.read(max_bytes, self._clamp(timeout, "ReadTimeout"))
        return data

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, self._clamp(timeout, "WriteTimeout"))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None,
                  timeout: float | None = None) -> _DeadlineStream:
        inner = self._inner.start_tls(ssl_context, server_hostname,
                                      self._clamp(timeout, "ConnectTimeout"))
        return _DeadlineStream(inner, self._clamp)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend:
    """A network backend whose connections are :class:`_DeadlineStream` (duck-types one)."""

    def __init__(self, inner: Any, clamp: _Clamp) -> None:
        self._inner = inner
        self._clamp = clamp

    def connect_tcp(self, host: str, port: int, timeout: float | None = None,
                    local_address: str | None = None, socket_options: Any = None) -> Any:
        stream = self._inner.connect_tcp(host, port, self._clamp(timeout, "ConnectTimeout"),
                                         local_address, socket_options)
        try:
            self._clamp(None, "ConnectTimeout")  # resolution and several addresses can overrun
        except BaseException:
            stream.close()
            raise
        return _DeadlineStream(stream, self._clamp)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Any = None) -> Any:
        stream = self._inner.connect_unix_socket(path, self._clamp(timeout, "ConnectTimeout"),
                                                 socket_options)
        return _DeadlineStream(stream, self._clamp)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def deadline_http_client() -> Any:
    """Return the SDK's default HTTP client, its socket waits bounded by :func:`bounded`.

    Raises:
        RuntimeError: the installed httpx/httpcore no longer has the pool attributes used here
            (so the deadline could not be enforced; fail at start-up, not silently).
    """
    import openai

    client = openai.DefaultHttpxClient()
    transports = [client._transport, *(t for t in client._mounts.values() if t is not None)]
    for transport in transports:
        pool = getattr(transport, "_pool", None)
        backend = getattr(pool, "_network_backend", None)
        if backend is None:
            raise RuntimeError(
                f"cannot bound LLM calls by their deadline: {type(transport).__name__} has no "
                "_pool._network_backend (httpx/httpcore changed)"
            )
        errors = sys.modules[type(pool).__module__.split(".")[0]]
        pool._network_backend = _DeadlineBackend(backend, _Clamp(errors))  # type: ignore[union-attr]
    return client
