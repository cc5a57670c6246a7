"""A scripted, OpenAI-compatible HTTP server for tests.

No LLM is reachable from the test machine, so tests point the real ``openai``
client at this server instead. It speaks just enough of the OpenAI REST API
(``POST /v1/chat/completions`` without streaming, ``GET /v1/models``) and
answers each chat completion call with the next *scripted response* from a
queue.

Example:
    >>> import openai
    >>> with ScriptedOpenAI() as srv:                           # doctest: +SKIP
    ...     srv.script(Reply("hello"), Status(429), JSONReply({"a": 1}))
    ...     client = openai.OpenAI(base_url=srv.base_url, api_key="test", max_retries=0)
    ...     client.chat.completions.create(model="m", messages=[]).choices[0].message.content
    'hello'

The server uses only the standard library (``http.server.ThreadingHTTPServer``
on ``127.0.0.1`` with an OS-assigned port) and runs in a background thread,
one handler thread per connection. Every response is sent with
``Connection: close`` so no idle keep-alive connection can outlive ``stop()``.

Response kinds:
    * :class:`Reply` - a normal ``chat.completion`` with ``finish_reason`` "stop".
    * :class:`JSONReply` - a :class:`Reply` whose content is ``json.dumps(obj)``.
    * :class:`Malformed` - a :class:`Reply` whose content is not valid JSON.
    * :class:`ToolCalls` - an assistant message with ``tool_calls``.
    * :class:`Status` - an HTTP error in the OpenAI error format.
    * :class:`Slow` - waits (interruptibly) before answering with another response.
    * :class:`Callable` - computes the response from the request body.

Wherever a response is expected, a plain ``str`` is accepted as shorthand for
``Reply(str)`` and a ``dict`` or ``list`` as shorthand for ``JSONReply(obj)``.
"""

import collections
import collections.abc
import http.server
import json
import logging
import math
import socketserver
import threading
import time
import uuid
from typing import Any

__all__ = [
    "Callable",
    "JSONReply",
    "Malformed",
    "Reply",
    "ScriptedOpenAI",
    "ScriptedResponse",
    "Slow",
    "Status",
    "ToolCalls",
]

_log = logging.getLogger(__name__)

DEFAULT_MODEL = "scripted-model"
"""Model name echoed back when a request carries no ``model`` field."""

_SYSTEM_FINGERPRINT = "fp_scripted"

# (type, code) pairs used for the default error body of a Status response,
# mirroring what the real API sends for the common status codes.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    408: ("timeout_error", None),
    409: ("invalid_request_error", "conflict"),
    422: ("invalid_request_error", None),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    502: ("server_error", None),
    503: ("server_error", "service_unavailable"),
}


def _error_body(message: str, code: int) -> dict[str, Any]:
    """Builds an OpenAI-style error body.

    Args:
        message: Human-readable error message.
        code: HTTP status code, used to pick ``type`` and ``code``.

    Returns:
        ``{"error": {"message": ..., "type": ..., "param": None, "code": ...}}``.
    """
    err_type, err_code = _ERROR_KINDS.get(
        code, ("server_error" if code >= 500 else "invalid_request_error", None)
    )
    return {"error": {"message": message, "type": err_type, "param": None, "code": err_code}}


def _estimate_tokens(text: str) -> int:
    """Roughly estimates a token count as one token per four characters.

    Args:
        text: The text to measure.

    Returns:
        ``ceil(len(text) / 4)``; 0 for an empty string.
    """
    return math.ceil(len(text) / 4)


class _Rendered:
    """A fully rendered HTTP response (status, headers, JSON-able or raw body)."""

    __slots__ = ("body", "headers", "status", "trickle_s")

    def __init__(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.headers = dict(headers or {})
        self.trickle_s = 0.0  # > 0: the body is sent one byte per this many seconds

    def encode(self) -> bytes:
        """Serialises the body: ``bytes`` as is, ``str`` as UTF-8, anything else as JSON."""
        if isinstance(self.body, bytes):
            return self.body
        if isinstance(self.body, str):
            return self.body.encode("utf-8")
        return json.dumps(self.body).encode("utf-8")


class _Context:
    """What a scripted response may use while rendering.

    Attributes:
        request: The parsed JSON body of the chat completion request.
        stopping: Set when the server is stopping; long waits must watch it.
        call_index: Zero-based index of this chat completion call.
    """

    __slots__ = ("call_index", "request", "stopping")

    def __init__(self, request: dict[str, Any], stopping: threading.Event, call_index: int) -> None:
        self.request = request
        self.stopping = stopping
        self.call_index = call_index


class ScriptedResponse:
    """Base class of all scripted responses."""

    def render(self, ctx: _Context) -> _Rendered | None:
        """Produces the HTTP response for one chat completion call.

        Args:
            ctx: The request being answered and server state.

        Returns:
            The response to send, or ``None`` to drop the connection without
            answering (used when the server stops mid-response).
        """
        raise NotImplementedError


def _coerce(response: Any) -> ScriptedResponse:
    """Turns shorthand values into scripted responses.

    Args:
        response: A :class:`ScriptedResponse`, a ``str`` (-> :class:`Reply`) or
            a ``dict``/``list`` (-> :class:`JSONReply`).

    Returns:
        The equivalent :class:`ScriptedResponse`.

    Raises:
        TypeError: If the value is none of the accepted kinds.
    """
    if isinstance(response, ScriptedResponse):
        return response
    if isinstance(response, str):
        return Reply(response)
    if isinstance(response, dict | list):
        return JSONReply(response)
    raise TypeError(f"not a scripted response: {response!r}")


def _completion(
    ctx: _Context,
    message: dict[str, Any],
    finish_reason: str,
    usage: tuple[int, int] | None,
) -> _Rendered:
    """Wraps an assistant message into a realistic ``chat.completion`` object.

    Args:
        ctx: The request being answered (its ``model`` is echoed back).
        message: The ``choices[0].message`` object.
        finish_reason: ``choices[0].finish_reason``.
        usage: ``(prompt_tokens, completion_tokens)``, or ``None`` to estimate
            both at one token per four characters of request messages and reply.

    Returns:
        A 200 response carrying the completion.
    """
    if usage is None:
        prompt = json.dumps(ctx.request.get("messages", []))
        completion = message.get("content") or json.dumps(message.get("tool_calls") or [])
        usage = (_estimate_tokens(prompt), _estimate_tokens(completion))
    prompt_tokens, completion_tokens = usage
    body = {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": ctx.request.get("model") or DEFAULT_MODEL,
        "system_fingerprint": _SYSTEM_FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "logprobs": None,
                "finish_reason": finish_reason,
            }
        ],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }
    return _Rendered(200, body)


class Reply(ScriptedResponse):
    """A normal assistant reply.

    Args:
        content: The assistant message content.
        usage: ``(prompt_tokens, completion_tokens)`` reported in ``usage``.
            ``None`` (the default) estimates both as ``ceil(chars / 4)`` of the
            JSON-encoded request messages and of the content respectively.
        finish_reason: ``choices[0].finish_reason``; "stop" by default, use
            "length" to simulate a truncated answer.
    """

    def __init__(
        self,
        content: str,
        usage: tuple[int, int] | None = None,
        finish_reason: str = "stop",
    ) -> None:
        self.content = content
        self.usage = usage
        self.finish_reason = finish_reason

    def render(self, ctx: _Context) -> _Rendered:
        """Renders the reply as a ``chat.completion`` (see :meth:`ScriptedResponse.render`)."""
        message = {"role": "assistant", "content": self.content, "refusal": None}
        return _completion(ctx, message, self.finish_reason, self.usage)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.content!r})"


class JSONReply(Reply):
    """A reply whose content is ``json.dumps(obj)``.

    Args:
        obj: Any JSON-serialisable value.
        usage: See :class:`Reply`.
        finish_reason: See :class:`Reply`.
    """

    def __init__(
        self,
        obj: Any,
        usage: tuple[int, int] | None = None,
        finish_reason: str = "stop",
    ) -> None:
        super().__init__(json.dumps(obj), usage=usage, finish_reason=finish_reason)
        self.obj = obj


class Malformed(Reply):
    """A reply whose content is meant *not* to parse as JSON.

    Identical to :class:`Reply`; the name documents intent in test scripts,
    e.g. ``Malformed('{"broken": ')``.
    """


class ToolCalls(ScriptedResponse):
    """An assistant message asking for tool calls (``finish_reason`` "tool_calls").

    Args:
        calls: Sequence of ``(name, arguments)`` or ``(name, arguments, call_id)``
            tuples. ``arguments`` is a ``dict`` (JSON-encoded for the wire) or an
            already-encoded ``str`` (sent verbatim, so it may be malformed on
            purpose). Missing ids are generated as ``call_<24 hex digits>``.
        content: Optional assistant text sent alongside the tool calls.
        usage: See :class:`Reply`.

    Attributes:
        ids: The tool call ids, in order, so tests can match ``tool`` messages.
    """

    def __init__(
        self,
        calls: collections.abc.Iterable[tuple[Any, ...]],
        content: str | None = None,
        usage: tuple[int, int] | None = None,
    ) -> None:
        self.calls: list[tuple[str, str, str]] = []
        for call in calls:
            if len(call) == 2:
                name, args = call
                call_id = f"call_{uuid.uuid4().hex[:24]}"
            elif len(call) == 3:
                name, args, call_id = call
            else:
                raise ValueError(f"tool call must be (name, args[, id]), got {call!r}")
            encoded = args if isinstance(args, str) else json.dumps(args)
            self.calls.append((str(name), encoded, str(call_id)))
        self.content = content
        self.usage = usage

    @property
    def ids(self) -> list[str]:
        """The tool call ids, in order."""
        return [call_id for _, _, call_id in self.calls]

    def render(self, ctx: _Context) -> _Rendered:
        """Renders the tool calls as a ``chat.completion`` (see :meth:`ScriptedResponse.render`)."""
        message = {
            "role": "assistant",
            "content": self.content,
            "refusal": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}
                for name, args, call_id in self.calls
            ],
        }
        return _completion(ctx, message, "tool_calls", self.usage)

    def __repr__(self) -> str:
        return f"ToolCalls({[(n, a) for n, a, _ in self.calls]!r})"


class Status(ScriptedResponse):
    """An HTTP error response.

    Args:
        code: HTTP status code, e.g. 429 or 500.
        body: Response body. ``None`` (default) builds an OpenAI error body
            ``{"error": {"message", "type", "param", "code"}}`` with a type and
            code typical for ``code``; a ``dict``/``list`` is sent as JSON; a
            ``str`` or ``bytes`` is sent verbatim.
        headers: Extra response headers, e.g. ``{"retry-after": "0"}``.
        message: Error message used when ``body`` is ``None``.
    """

    def __init__(
        self,
        code: int,
        body: Any = None,
        headers: dict[str, str] | None = None,
        message: str | None = None,
    ) -> None:
        self.code = code
        self.body = body
        self.headers = dict(headers or {})
        self.message = message or f"Scripted HTTP {code} error"

    def render(self, ctx: _Context) -> _Rendered:
        """Renders the error (see :meth:`ScriptedResponse.render`)."""
        body = self.body if self.body is not None else _error_body(self.message, self.code)
        return _Rendered(self.code, body, self.headers)

    def __repr__(self) -> str:
        return f"Status({self.code})"


class Slow(ScriptedResponse):
    """Waits before answering, e.g. to provoke a client timeout.

    The wait is interruptible: it ends early when the server stops, in which
    case the connection is dropped without a response, so ``stop()`` returns
    promptly. Other requests are served concurrently meanwhile.

    Args:
        seconds: How long to wait before answering, in seconds.
        then: The response sent after the wait (shorthand allowed); defaults
            to ``Reply("")``.
    """

    def __init__(self, seconds: float, then: Any = None) -> None:
        self.seconds = seconds
        self.then = _coerce(then if then is not None else Reply(""))

    def render(self, ctx: _Context) -> _Rendered | None:
        """Waits, then renders ``then`` (see :meth:`ScriptedResponse.render`)."""
        if ctx.stopping.wait(self.seconds):
            return None
        return self.then.render(ctx)

    def __repr__(self) -> str:
        return f"Slow({self.seconds}, then={self.then!r})"


class Trickle(ScriptedResponse):
    """Sends the headers at once, then the body one byte every ``interval_s`` seconds.

    Each byte arrives well within any per-read timeout, so only a wall-clock bound on the whole
    request stops a client from waiting ``len(body) * interval_s`` seconds.

    Args:
        interval_s: Seconds between two bytes of the body.
        then: The response whose body is trickled (shorthand allowed).
    """

    def __init__(self, interval_s: float, then: Any) -> None:
        self.interval_s = interval_s
        self.then = _coerce(then)

    def render(self, ctx: _Context) -> _Rendered | None:
        """Renders ``then`` and marks it to be sent slowly."""
        rendered = self.then.render(ctx)
        if rendered is not None:
            rendered.trickle_s = self.interval_s
        return rendered

    def __repr__(self) -> str:
        return f"Trickle({self.interval_s}, then={self.then!r})"


class Callable(ScriptedResponse):
    """Computes the response from the request, for dynamic behaviour.

    Args:
        fn: Called as ``fn(request_json)`` with the parsed request body; returns
            a scripted response (shorthand allowed). If ``fn`` raises, the
            client gets a 500 whose message names the exception.
    """

    def __init__(self, fn: collections.abc.Callable[[dict[str, Any]], Any]) -> None:
        self.fn = fn

    def render(self, ctx: _Context) -> _Rendered | None:
        """Calls ``fn`` and renders its result (see :meth:`ScriptedResponse.render`)."""
        return _coerce(self.fn(ctx.request)).render(ctx)

    def __repr__(self) -> str:
        return f"Callable({self.fn!r})"


class _Server(http.server.ThreadingHTTPServer):
    """ThreadingHTTPServer that knows its :class:`ScriptedOpenAI` owner."""

    daemon_threads = True

    def __init__(self, owner: "ScriptedOpenAI") -> None:
        self.owner = owner
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), a reverse DNS lookup
        # that can take seconds on badly configured hosts; skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)


class _Handler(http.server.BaseHTTPRequestHandler):
    """Routes requests to the owning :class:`ScriptedOpenAI`."""

    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("%s - " + format, self.address_string(), *args)

    def _send(self, rendered: _Rendered) -> None:
        payload = rendered.encode()
        self.close_connection = True
        try:
            self.send_response(rendered.status)
            headers = {k.lower(): v for k, v in rendered.headers.items()}
            headers.setdefault("content-type", "application/json")
            headers.setdefault("x-request-id", f"req_{uuid.uuid4().hex}")
            headers["content-length"] = str(len(payload))
            headers["connection"] = "close"
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            if rendered.trickle_s > 0:
                self.wfile.flush()
                for i in range(len(payload)):
                    self.wfile.write(payload[i : i + 1])
                    self.wfile.flush()
                    if self.server.owner._stopping.wait(rendered.trickle_s):
                        return
            else:
                self.wfile.write(payload)
            self.wfile.flush()
        except OSError as exc:  # client gave up (timeout) or went away
            _log.debug("client disconnected before the response was sent: %s", exc)

    def _path(self) -> str:
        return self.path.split("?", 1)[0].rstrip("/")

    def do_GET(self) -> None:
        if self._path() == "/v1/models":
            self._send(self.server.owner._models_response())
        else:
            self._send(_Rendered(404, _error_body(f"Unknown path: GET {self.path}", 404)))

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if self._path() != "/v1/chat/completions":
            self._send(_Rendered(404, _error_body(f"Unknown path: POST {self.path}", 404)))
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        rendered = self.server.owner._answer(raw, headers)
        if rendered is None:  # server stopping: drop the connection
            self.close_connection = True
            return
        self._send(rendered)


class ScriptedOpenAI:
    """A scripted OpenAI-compatible server on ``127.0.0.1``.

    Each ``POST /v1/chat/completions`` consumes the next response queued with
    :meth:`script`; when the queue is empty, :attr:`default` is used, and if
    that is ``None`` the client gets a 500 "script exhausted" error.

    Args:
        models: Model ids listed by ``GET /v1/models``.

    """

    def __init__(self, models: collections.abc.Iterable[str] = (DEFAULT_MODEL,)) -> None:
        self._default: ScriptedResponse | None = None
        self.models = list(models)
        self._queue: collections.deque[ScriptedResponse] = collections.deque()
        self._requests: list[dict[str, Any]] = []
        self._request_headers: list[dict[str, str]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> "ScriptedOpenAI":
        """Binds a free port on ``127.0.0.1`` and serves in a background thread.

        Returns:
            ``self``, for chaining.

        Raises:
            RuntimeError: If the server is already running.
        """
        if self._server is not None:
            raise RuntimeError("ScriptedOpenAI is already running")
        self._stopping.clear()
        self._server = _Server(self)
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"ScriptedOpenAI:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stops serving and closes the listening socket; idempotent.

        In-flight :class:`Slow` responses are interrupted and their connections
        dropped, so this returns promptly (well under a second).

        Args:
            timeout: Maximum time to wait for the serving thread, in seconds.
        """
        server, thread = self._server, self._thread
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout)
        self._server = self._thread = None

    def __enter__(self) -> "ScriptedOpenAI":
        if self._server is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """Whether the server is currently serving."""
        return self._server is not None

    @property
    def port(self) -> int:
        """The TCP port the server listens on.

        Raises:
            RuntimeError: If the server is not running.
        """
        if self._server is None:
            raise RuntimeError("ScriptedOpenAI is not running; call start() first")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``base_url`` to pass to ``openai.OpenAI``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- scripting -----------------------------------------------------------

    def script(self, *responses: Any) -> "ScriptedOpenAI":
        """Appends responses to the queue; each chat completion call consumes one.

        Args:
            *responses: Scripted responses, in the order they are to be served
                (``str``/``dict`` shorthands allowed).

        Returns:
            ``self``, for chaining.
        """
        coerced = [_coerce(r) for r in responses]
        with self._lock:
            self._queue.extend(coerced)
        return self

    @property
    def default(self) -> ScriptedResponse | None:
        """Response used when the script queue is empty, or ``None``.

        With ``None`` (the initial value), a call on an empty queue gets a 500
        "script exhausted" error. Setting accepts ``str``/``dict`` shorthands.
        """
        return self._default

    @default.setter
    def default(self, response: Any) -> None:
        self._default = None if response is None else _coerce(response)

    @property
    def remaining(self) -> int:
        """Number of scripted responses not consumed yet."""
        with self._lock:
            return len(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Snapshot of the JSON bodies of all chat completion requests, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def request_headers(self) -> list[dict[str, str]]:
        """Snapshot of request headers, names lower-cased (parallel to :attr:`requests`)."""
        with self._lock:
            return [dict(h) for h in self._request_headers]

    @property
    def calls(self) -> int:
        """Number of chat completion calls received (including rejected ones)."""
        with self._lock:
            return len(self._requests)

    @property
    def last_request(self) -> dict[str, Any]:
        """The most recent chat completion request body.

        Raises:
            IndexError: If no request has been received.
        """
        with self._lock:
            return self._requests[-1]

    # -- request handling (called from handler threads) ----------------------

    def _models_response(self) -> _Rendered:
        created = int(time.time())
        data = [
            {"id": m, "object": "model", "created": created, "owned_by": "scripted"}
            for m in self.models
        ]
        return _Rendered(200, {"object": "list", "data": data})

    def _answer(self, raw: bytes, headers: dict[str, str]) -> _Rendered | None:
        try:
            request = json.loads(raw or b"null")
        except ValueError as exc:
            return _Rendered(400, _error_body(f"Request body is not valid JSON: {exc}", 400))
        if not isinstance(request, dict):
            return _Rendered(400, _error_body("Request body must be a JSON object", 400))

        if request.get("stream"):
            msg = "ScriptedOpenAI does not support stream=true; use non-streaming requests"
            rejection: _Rendered | None = _Rendered(400, _error_body(msg, 400))
        else:
            rejection = None
        with self._lock:
            call_index = len(self._requests)
            self._requests.append(request)
            self._request_headers.append(headers)
            if rejection is not None:
                return rejection
            if self._queue:
                response = self._queue.popleft()
            elif self._default is not None:
                response = self._default
            else:
                msg = (
                    f"ScriptedOpenAI: script exhausted (call #{call_index + 1} has no "
                    "scripted response left and no default is set)"
                )
                return _Rendered(500, _error_body(msg, 500))

        ctx = _Context(request, self._stopping, call_index)
        try:
            return response.render(ctx)
        except Exception as exc:  # noqa: BLE001 - report any script error to the client
            _log.exception("scripted response %r failed", response)
            msg = f"ScriptedOpenAI: {response!r} raised {type(exc).__name__}: {exc}"
            return _Rendered(500, _error_body(msg, 500))

    def __repr__(self) -> str:
        where = self.base_url if self._server is not None else "stopped"
        return f"<ScriptedOpenAI {where} remaining={self.remaining} calls={self.calls}>"
