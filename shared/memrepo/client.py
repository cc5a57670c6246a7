"""A client for bots: publish a session's end to Pub/Sub, get a context from the retrieval function.

::

    from memrepo.client import MemoryClient, GoogleIdToken

    client = MemoryClient(
        topic_path="projects/p/topics/session-ended",
        retrieval_url="https://REGION-p.cloudfunctions.net/get_context",
        auth=GoogleIdToken("https://REGION-p.cloudfunctions.net/get_context"),
    )
    client.publish_session_end("u-123", "2024-05-01-am", turns, occurred_at=ended_at)
    ctx = client.get_context("u-123", [{"role": "user", "content": "How is Sarah?"}])
    print(ctx.context, ctx.tokens_used, ctx.engine)

* ``publish_session_end`` validates the event with the writer's own schema
  (:func:`memrepo.events.parse_session_ended`) *before* publishing, so a bad event fails in the
  bot, not as a rejected message in the writer's logs; it publishes through
  :class:`memrepo.adapters.pubsub.SessionPublisher` (data = event JSON, attributes ``user_id``
  and ``session_id``, the user id as ordering key) and returns the message id.
* ``get_context`` POSTs ``{user_id, conversation, max_tokens, deadline_ms?}`` with a Google-signed
  ID token (:class:`GoogleIdToken`, for a function that requires IAM authentication) or a static
  bearer token (:class:`BearerToken`, for ``MEMREPO_AUTH_TOKEN``), a per-attempt timeout, and
  retries (tenacity, jittered exponential backoff honouring ``Retry-After``) on 429, 503 and
  connection errors only. The answer is a typed :class:`ContextResponse`.

Errors (all in memrepo's tree): :class:`~memrepo.errors.InvalidEvent` /
:class:`~memrepo.errors.InvalidRequest` for bad input (checked locally, or a 400);
:class:`~memrepo.errors.Unauthorized` for 401/403; :class:`RetrievalRejected` for other answers
that retrying cannot fix; :class:`RetrievalUnavailable` when the retries ran out;
:class:`~memrepo.errors.StoreUnavailable` when publishing failed.

Google libraries are imported on first use only (``google.cloud.pubsub_v1`` by the publisher,
``google.oauth2.id_token`` by :class:`GoogleIdToken`).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, ValidationError
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt
from tenacity.wait import wait_random_exponential

from memrepo.conversation import parse_conversation
from memrepo.errors import InvalidRequest, PermanentError, TransientError, Unauthorized
from memrepo.events import DEFAULT_MAX_TRANSCRIPT_BYTES, parse_session_ended

__all__ = [
    "BearerToken",
    "ContextBlock",
    "ContextResponse",
    "GoogleIdToken",
    "HttpReply",
    "MemoryClient",
    "RetrievalRejected",
    "RetrievalUnavailable",
    "UrllibTransport",
]

#: Statuses retried (with connection errors); everything else is answered at once.
RETRY_STATUSES = frozenset({429, 503})


class RetrievalUnavailable(TransientError):
    """Raised when the retrieval function kept answering 429/503 or was unreachable."""


class RetrievalRejected(PermanentError):
    """Raised when the retrieval function answered with a status retrying cannot fix (404, 500...)
    or a body that is not a context."""


class ContextBlock(BaseModel):
    """One block of a context: where it comes from and its size in tokens (cl100k_base)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    source: str
    kind: str
    tokens: int
    reason: str = ""
    cut: bool = False


class ContextResponse(BaseModel):
    """The retrieval function's answer (``ContextResult.to_json`` of :mod:`memrepo.retrieval`).

    Attributes:
        context: the text to put in the bot's prompt ("" when nothing matched).
        blocks: the blocks it is made of.
        tokens_used: its size in tokens, within the requested ``max_tokens``.
        engine: ``deterministic`` or the LLM agent's name.
        elapsed_ms: server-side time in milliseconds.
        fallback_reason: why the deterministic plan stood in, if it did.
        metadata: engine details.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")

    context: str
    blocks: tuple[ContextBlock, ...] = ()
    tokens_used: int
    engine: str
    elapsed_ms: float = 0.0
    fallback_reason: str | None = None
    metadata: dict[str, Any] = {}


# -- auth --------------------------------------------------------------------------------------


class Auth(Protocol):
    """Port: headers that authenticate one request."""

    def headers(self) -> dict[str, str]:
        """Return the headers to add (``Authorization``)."""
        ...


@dataclass(frozen=True)
class BearerToken:
    """A static bearer token (the retrieval function's ``MEMREPO_AUTH_TOKEN``)."""

    token: str

    def headers(self) -> dict[str, str]:
        """Return ``{"Authorization": "Bearer <token>"}``."""
        return {"Authorization": f"Bearer {self.token}"}

    def __repr__(self) -> str:
        return "BearerToken(***)"


class GoogleIdToken:
    """A Google-signed ID token for ``audience`` (the function's URL), cached until near expiry.

    Uses ``google.oauth2.id_token.fetch_id_token`` (service-account credentials, the metadata
    server on Google Cloud, or ``GOOGLE_APPLICATION_CREDENTIALS``). Tokens live about an hour;
    a new one is fetched ``refresh_margin_s`` before ``exp``.
    """

    def __init__(
        self,
        audience: str,
        *,
        fetch: Callable[[str], str] | None = None,
        refresh_margin_s: float = 300.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """Args:
        audience: the receiving function's URL.
        fetch: returns a token for an audience (default: ``fetch_id_token``; tests pass one).
        refresh_margin_s: seconds before ``exp`` at which a new token is fetched.
        clock: wall clock in Unix seconds.
        """
        self.audience = audience
        self._fetch = fetch or _fetch_google_id_token
        self._margin = refresh_margin_s
        self._clock = clock
        self._token: str | None = None
        self._expires = 0.0
        self._lock = threading.Lock()

    def headers(self) -> dict[str, str]:
        """Return ``{"Authorization": "Bearer <ID token>"}``, fetching a token when needed."""
        with self._lock:
            if self._token is None or self._clock() >= self._expires - self._margin:
                self._token = self._fetch(self.audience)
                self._expires = _jwt_exp(self._token) or self._clock() + 3600
            return {"Authorization": f"Bearer {self._token}"}


def _fetch_google_id_token(audience: str) -> str:
    import google.auth.transport.requests
    import google.oauth2.id_token

    request = google.auth.transport.requests.Request()
    token: str = google.oauth2.id_token.fetch_id_token(request, audience)  # type: ignore[no-untyped-call]
    return token


def _jwt_exp(token: str) -> float | None:
    """Return the ``exp`` claim (Unix s) of a JWT, unverified (only to schedule a refresh)."""
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, ValueError, KeyError, TypeError):
        return None


# -- transport ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpReply:
    """An HTTP answer: status, headers (lower-case names), body bytes."""

    status: int
    headers: dict[str, str]
    body: bytes


class Transport(Protocol):
    """Port: send one POST. Raise ``OSError`` (``ConnectionError``, ``TimeoutError``) when no
    answer came; return the answer for any status."""

    def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpReply:
        """Send ``body`` to ``url``; return the reply."""
        ...


class UrllibTransport:
    """The default :class:`Transport`, on the standard library (``urllib.request``)."""

    def post(
        self, url: str, body: bytes, headers: Mapping[str, str], timeout_s: float
    ) -> HttpReply:
        """Send one POST; any status comes back as an :class:`HttpReply`.

        Raises:
            OSError: connection refused or reset, DNS failure, timeout.
        """
        if not url.startswith(("https://", "http://")):
            raise ValueError(f"retrieval URL must be http(s), got {url!r}")
        request = urllib.request.Request(  # noqa: S310 - http(s) checked above
            url, data=body, headers=dict(headers), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as response:  # noqa: S310
                return HttpReply(response.status, _lower(response.headers), response.read())
        except urllib.error.HTTPError as exc:
            return HttpReply(exc.code, _lower(exc.headers), exc.read())
        except urllib.error.URLError as exc:
            reason = exc.reason
            raise reason if isinstance(reason, OSError) else ConnectionError(str(reason)) from exc


def _lower(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers.items() if headers else [])}


# -- the client --------------------------------------------------------------------------------


class _Retry(Exception):  # noqa: N818 - internal signal for tenacity
    def __init__(self, reason: str, retry_after_s: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after_s = retry_after_s


class MemoryClient:
    """Publish session ends and fetch contexts (see the module docstring)."""

    def __init__(
        self,
        *,
        topic_path: str | None = None,
        retrieval_url: str | None = None,
        auth: Auth | None = None,
        timeout_s: float = 10.0,
        max_attempts: int = 4,
        max_wait_s: float = 5.0,
        publisher: Any = None,
        transport: Transport | None = None,
        max_transcript_bytes: int = DEFAULT_MAX_TRANSCRIPT_BYTES,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Args:
        topic_path: ``projects/<p>/topics/<t>`` of session-end events (for publishing).
        retrieval_url: the retrieval function's URL (for contexts).
        auth: request authentication (:class:`GoogleIdToken`, :class:`BearerToken`) or none.
        timeout_s: per-attempt HTTP timeout in seconds.
        max_attempts: attempts of one context request, at least 1.
        max_wait_s: ceiling of one backoff (and of an honoured ``Retry-After``) in seconds.
        publisher: an object with ``publish_all(events, timeout_s)`` (default: a
            :class:`~memrepo.adapters.pubsub.SessionPublisher` on ``topic_path``).
        transport: sends HTTP requests (default: :class:`UrllibTransport`).
        max_transcript_bytes: the writer's transcript limit, checked before publishing.
        sleep: the sleep function between retries (tests pass a fake).
        """
        self.topic_path = topic_path
        self.retrieval_url = retrieval_url
        self.auth = auth
        self.timeout_s = timeout_s
        self.max_attempts = max(1, max_attempts)
        self.max_wait_s = max_wait_s
        self.max_transcript_bytes = max_transcript_bytes
        self._publisher = publisher
        self._transport = transport or UrllibTransport()
        self._sleep = sleep

    @classmethod
    def from_env(cls, environ: Mapping[str, str], **overrides: Any) -> MemoryClient:
        """Build a client from ``MEMREPO_TOPIC``, ``MEMREPO_RETRIEVAL_URL`` and either
        ``MEMREPO_AUTH_TOKEN`` (bearer) or ``MEMREPO_ID_TOKEN_AUDIENCE`` (Google ID token)."""
        auth: Auth | None = None
        if environ.get("MEMREPO_AUTH_TOKEN"):
            auth = BearerToken(environ["MEMREPO_AUTH_TOKEN"])
        elif environ.get("MEMREPO_ID_TOKEN_AUDIENCE"):
            auth = GoogleIdToken(environ["MEMREPO_ID_TOKEN_AUDIENCE"])
        values: dict[str, Any] = {
            "topic_path": environ.get("MEMREPO_TOPIC") or None,
            "retrieval_url": environ.get("MEMREPO_RETRIEVAL_URL") or None,
            "auth": auth,
        }
        return cls(**{**values, **overrides})

    # -- publishing ------------------------------------------------------------------------------

    def publish_session_end(
        self,
        user_id: str,
        session_id: str,
        turns: Sequence[Mapping[str, Any]],
        *,
        occurred_at: datetime | None = None,
        metadata: Mapping[str, Any] | None = None,
        timeout_s: float = 30.0,
    ) -> str:
        """Validate one finished session and publish it; return the Pub/Sub message id.

        Args:
            user_id: the user (ordering key).
            session_id: a stable id: publishing it again is a no-op for the writer.
            turns: ``{speaker, role, content, turn_id?}`` dicts, oldest first.
            occurred_at: when the session happened (default: now, UTC).
            metadata: small JSON-able details (channel, bot version).
            timeout_s: seconds to wait for the publish to be acknowledged.

        Raises:
            InvalidEvent, EventTooLarge: the event fails the writer's schema (nothing published).
            StoreUnavailable: publishing failed or timed out (transient).
            ValueError: the client has no ``topic_path``.
        """
        event = parse_session_ended(
            {
                "user_id": user_id,
                "session_id": session_id,
                "occurred_at": (occurred_at or datetime.now(UTC)).isoformat(),
                "turns": [dict(t) for t in turns],
                "metadata": dict(metadata or {}),
            },
            max_transcript_bytes=self.max_transcript_bytes,
        )
        if self._publisher is None:
            if not self.topic_path:
                raise ValueError("publishing needs topic_path (MEMREPO_TOPIC)")
            from memrepo.adapters.pubsub import SessionPublisher

            self._publisher = SessionPublisher(self.topic_path)
        ids: list[str] = self._publisher.publish_all([event], timeout_s=timeout_s)
        return ids[0]

    # -- contexts --------------------------------------------------------------------------------

    def get_context(
        self,
        user_id: str,
        conversation: Sequence[Mapping[str, str]],
        *,
        max_tokens: int | None = None,
        deadline_ms: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> ContextResponse:
        """Return the context for ``conversation`` from the user's memory.

        Args:
            user_id: the user.
            conversation: ``{role, content}`` messages, oldest first (checked locally).
            max_tokens: the budget in tokens (cl100k_base); the server default when omitted.
            deadline_ms: the server-side deadline in milliseconds (100-120000).
            headers: extra headers, e.g. ``traceparent`` to join the bot's trace.

        Raises:
            InvalidRequest: a bad conversation (locally) or a 400 answer.
            Unauthorized: a 401 or 403 answer.
            RetrievalRejected: another answer retrying cannot fix, or a malformed body.
            RetrievalUnavailable: 429/503/connection errors outlasted ``max_attempts``.
            ValueError: the client has no ``retrieval_url``.
        """
        if not self.retrieval_url:
            raise ValueError("contexts need retrieval_url (MEMREPO_RETRIEVAL_URL)")
        request: dict[str, Any] = {
            "user_id": user_id,
            "conversation": parse_conversation([dict(m) for m in conversation]),
        }
        if max_tokens is not None:
            request["max_tokens"] = max_tokens
        if deadline_ms is not None:
            request["deadline_ms"] = deadline_ms
        body = json.dumps(request, ensure_ascii=False).encode("utf-8")
        retrying = Retrying(
            stop=stop_after_attempt(self.max_attempts),
            wait=self._wait,
            retry=retry_if_exception_type(_Retry),
            sleep=self._sleep,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    reply = self._send(body, headers or {})
        except _Retry as exc:
            raise RetrievalUnavailable(
                f"retrieval at {self.retrieval_url} unavailable after {self.max_attempts} "
                f"attempts: {exc}"
            ) from None
        return self._parse(reply)

    def _wait(self, state: RetryCallState) -> float:
        outcome = state.outcome
        exc = outcome.exception() if outcome is not None else None
        if isinstance(exc, _Retry) and exc.retry_after_s is not None:
            return min(exc.retry_after_s, self.max_wait_s)
        return float(wait_random_exponential(multiplier=0.2, max=self.max_wait_s)(state))

    def _send(self, body: bytes, extra: Mapping[str, str]) -> HttpReply:
        headers = {"Content-Type": "application/json", **extra}
        if self.auth is not None:
            headers.update(self.auth.headers())
        assert self.retrieval_url is not None
        try:
            reply = self._transport.post(self.retrieval_url, body, headers, self.timeout_s)
        except OSError as exc:
            raise _Retry(f"{type(exc).__name__}: {exc}") from exc
        if reply.status in RETRY_STATUSES:
            raise _Retry(f"HTTP {reply.status}", _retry_after(reply.headers.get("retry-after")))
        return reply

    def _parse(self, reply: HttpReply) -> ContextResponse:
        try:
            data = json.loads(reply.body or b"null")
        except (json.JSONDecodeError, UnicodeDecodeError):
            data = None
        message = data.get("error") if isinstance(data, dict) else None
        detail = f"HTTP {reply.status}: {message or reply.body[:200]!r}"
        if reply.status == 400:
            raise InvalidRequest(detail)
        if reply.status in (401, 403):
            raise Unauthorized(detail)
        if reply.status != 200:
            raise RetrievalRejected(detail)
        try:
            return ContextResponse.model_validate(data)
        except ValidationError as exc:
            raise RetrievalRejected(f"the answer is not a context: {exc.errors()[:3]}") from exc


def _retry_after(value: str | None) -> float | None:
    """Return a ``Retry-After`` value in seconds (delta-seconds form only), else ``None``."""
    try:
        return max(0.0, float(value)) if value else None
    except ValueError:
        return None
