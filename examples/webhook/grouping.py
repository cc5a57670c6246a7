"""Grouping a chat's messages into sessions, and an outbox so no closed session is lost.

Pure part — :class:`SessionGrouper` (no I/O, an injectable clock): a user's session is open from
their first message until one of

* **silence**: a message arrives ``idle`` or more after the previous one (the old session closes,
  the message opens a new one), or :meth:`SessionGrouper.expire` runs after that long;
* **an explicit end**: a message with ``end=True`` (its text, if any, is the last turn);
* **size**: ``max_turns`` turns.

A session's id is derived from the user and its first message (``20240501T093000Z-<hash>``), and
its ``occurred_at`` is the first message's time, so re-processing the same messages (a retried
webhook) yields the same session, which the writer then treats as a duplicate.

Stateful part — :class:`WebhookService`: per user, one small JSON document ``{"open": ...,
"outbox": [...]}`` kept in a :class:`StateStore` with optimistic concurrency. Closed sessions go
to the outbox *in the same conditional write* that closes them, are published after that write
succeeded, and leave the outbox in a later write; a crash in between only republishes, which the
writer absorbs (same session id and digest → ``duplicate``). Two messages of one user handled at
once cannot fork a session: the loser of the conditional write re-reads and re-applies.

Where the open sessions live (the trade-off, see README.md): :class:`MemoryStateStore` (one
instance's memory: fastest, but sessions are cut or lost when the instance is recycled or a
second instance starts, so only with ``max-instances=1`` and for demos) or
:class:`ObjectStateStore` (one small object per user in Cloud Storage through memrepo's
:class:`~memrepo.store.base.BundleStore`, ``if_generation_match`` on every write: survives
restarts and any number of instances, costs one read and one or two writes per message).
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from memrepo.errors import PermanentError, PreconditionFailed
from memrepo.store.base import BundleStore

log = logging.getLogger(__name__)

Role = Literal["user", "assistant", "other"]


@dataclass(frozen=True)
class Message:
    """One incoming chat message (already mapped from the platform's payload).

    Attributes:
        user_id: the memory's user (a stable ASCII id, see memrepo.ids).
        speaker: display name of who wrote it.
        role: ``user`` (the end user), ``assistant`` (the bot) or ``other``.
        text: the message text ("" for a bare end signal).
        at: when it was sent (timezone-aware); the grouper's clock when ``None``.
        end: the conversation ends with this message.
    """

    user_id: str
    speaker: str
    role: Role
    text: str
    at: datetime | None = None
    end: bool = False


@dataclass(frozen=True)
class OpenSession:
    """A session still receiving messages."""

    user_id: str
    session_id: str
    started_at: datetime
    last_at: datetime
    turns: tuple[dict[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form kept in the state store."""
        return {"user_id": self.user_id, "session_id": self.session_id,
                "started_at": self.started_at.isoformat(), "last_at": self.last_at.isoformat(),
                "turns": list(self.turns)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OpenSession:
        """Return the session of :meth:`to_json`'s output."""
        return cls(data["user_id"], data["session_id"], datetime.fromisoformat(data["started_at"]),
                   datetime.fromisoformat(data["last_at"]), tuple(data["turns"]))


@dataclass(frozen=True)
class ClosedSession:
    """A finished session, ready to publish as a memrepo ``SessionEnded`` event."""

    user_id: str
    session_id: str
    occurred_at: datetime
    turns: tuple[dict[str, str], ...]
    reason: Literal["idle", "end", "max_turns"]

    def to_json(self) -> dict[str, Any]:
        """Return the JSON form (also the event body, plus ``metadata.closed_by``)."""
        return {"user_id": self.user_id, "session_id": self.session_id,
                "occurred_at": self.occurred_at.isoformat(), "turns": list(self.turns),
                "reason": self.reason}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ClosedSession:
        """Return the session of :meth:`to_json`'s output."""
        return cls(data["user_id"], data["session_id"],
                   datetime.fromisoformat(data["occurred_at"]), tuple(data["turns"]),
                   data["reason"])


def session_id_for(user_id: str, first: datetime, first_text: str) -> str:
    """Return a stable session id from the user and the first message (time and text)."""
    digest = hashlib.sha256(f"{user_id}\n{first.isoformat()}\n{first_text}".encode()).hexdigest()
    return f"{first.astimezone(UTC):%Y%m%dT%H%M%SZ}-{digest[:10]}"


class SessionGrouper:
    """Pure session grouping (see the module docstring). Thread-safe: it holds no state."""

    def __init__(
        self,
        idle: timedelta = timedelta(minutes=30),
        *,
        max_turns: int = 500,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """Args:
        idle: silence that ends a session.
        max_turns: turns after which a session is closed (memrepo accepts up to 5,000).
        clock: the current time (timezone-aware), for messages without ``at`` and for expiry.
        """
        self.idle = idle
        self.max_turns = max_turns
        self.clock = clock

    def add(
        self, state: OpenSession | None, message: Message
    ) -> tuple[OpenSession | None, list[ClosedSession]]:
        """Return the user's open session after ``message`` and the sessions it closed (oldest
        first)."""
        at = message.at or self.clock()
        closed: list[ClosedSession] = []
        if state is not None and at - state.last_at >= self.idle:
            closed.append(self._close(state, "idle"))
            state = None
        if message.text:
            turn = {"speaker": message.speaker, "role": message.role, "content": message.text}
            if state is None:
                sid = session_id_for(message.user_id, at, message.text)
                state = OpenSession(message.user_id, sid, at, at)
            state = replace(state, last_at=max(at, state.last_at), turns=(*state.turns, turn))
        if state is not None and (message.end or len(state.turns) >= self.max_turns):
            closed.append(self._close(state, "end" if message.end else "max_turns"))
            state = None
        return state, closed

    def expire(self, state: OpenSession | None) -> tuple[OpenSession | None, list[ClosedSession]]:
        """Close ``state`` if it has been silent for ``idle`` by the clock."""
        if state is not None and self.clock() - state.last_at >= self.idle:
            return None, [self._close(state, "idle")]
        return state, []

    @staticmethod
    def _close(state: OpenSession, reason: Literal["idle", "end", "max_turns"]) -> ClosedSession:
        return ClosedSession(state.user_id, state.session_id, state.started_at, state.turns, reason)


# -- state ----------------------------------------------------------------------------------------


@dataclass
class UserState:
    """One user's document: the open session and the outbox of closed, unpublished sessions."""

    open: OpenSession | None = None
    outbox: list[ClosedSession] = field(default_factory=list)

    def to_bytes(self) -> bytes:
        """Return the JSON bytes stored."""
        return json.dumps({"open": self.open.to_json() if self.open else None,
                           "outbox": [c.to_json() for c in self.outbox]}).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> UserState:
        """Return the state of :meth:`to_bytes`'s output."""
        raw = json.loads(data)
        return cls(OpenSession.from_json(raw["open"]) if raw["open"] else None,
                   [ClosedSession.from_json(c) for c in raw["outbox"]])


class StateStore(ABC):
    """Port: per-user state documents with a generation precondition (0: absent)."""

    @abstractmethod
    def get(self, user_id: str) -> tuple[UserState, int]:
        """Return the user's state and its generation (an empty state and 0 when absent)."""

    @abstractmethod
    def put(self, user_id: str, state: UserState, generation: int) -> int:
        """Store ``state`` if the live generation is ``generation``; return the new one.

        Raises:
            PreconditionFailed: another request changed the state first.
        """

    @abstractmethod
    def users(self) -> list[str]:
        """Return the users that have a state document (for :meth:`WebhookService.flush`)."""


class MemoryStateStore(StateStore):
    """States in this process's memory (one instance only; lost on restart)."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[bytes, int]] = {}
        self._lock = threading.Lock()
        self._next = 0

    def get(self, user_id: str) -> tuple[UserState, int]:
        """See :meth:`StateStore.get`."""
        with self._lock:
            found = self._data.get(user_id)
        return (UserState.from_bytes(found[0]), found[1]) if found else (UserState(), 0)

    def put(self, user_id: str, state: UserState, generation: int) -> int:
        """See :meth:`StateStore.put`."""
        with self._lock:
            live = self._data.get(user_id, (b"", 0))[1]
            if live != generation:
                raise PreconditionFailed(f"webhook state of {user_id} changed")
            self._next += 1
            self._data[user_id] = (state.to_bytes(), self._next)
            return self._next

    def users(self) -> list[str]:
        """See :meth:`StateStore.users`."""
        with self._lock:
            return sorted(self._data)


class ObjectStateStore(StateStore):
    """States as objects ``users/<id>/webhook-state.json`` in a memrepo bundle store (GCS).

    Kept under the user's prefix, so deleting a user's memory (``memrepo delete``) also deletes
    the messages of their open session.
    """

    NAME = "webhook-state.json"

    def __init__(self, store: BundleStore) -> None:
        """Args:
        store: the object store (``memrepo.store.open_store("gs://bucket/prefix")``).
        """
        self.store = store

    def _key(self, user_id: str) -> str:
        from memrepo.ids import validate_user_id

        return f"users/{validate_user_id(user_id)}/{self.NAME}"

    def get(self, user_id: str) -> tuple[UserState, int]:
        """See :meth:`StateStore.get`."""
        found = self.store.get(self._key(user_id))
        return (UserState.from_bytes(found.data), found.generation) if found else (UserState(), 0)

    def put(self, user_id: str, state: UserState, generation: int) -> int:
        """See :meth:`StateStore.put`."""
        return self.store.put(self._key(user_id), state.to_bytes(), if_generation_match=generation)

    def users(self) -> list[str]:
        """See :meth:`StateStore.users`."""
        return [k.split("/")[1] for k in self.store.list("users/") if k.endswith("/" + self.NAME)]


# -- the service ----------------------------------------------------------------------------------


class WebhookService:
    """Receive messages, keep sessions, publish closed ones through an outbox."""

    def __init__(
        self,
        grouper: SessionGrouper,
        states: StateStore,
        publish: Callable[[ClosedSession], object],
        *,
        max_attempts: int = 10,
    ) -> None:
        """Args:
        grouper: the grouping rules.
        states: where each user's state lives.
        publish: publishes one closed session (memrepo's ``MemoryClient.publish_session_end``);
            it may raise: the session stays in the outbox and is retried on the next call.
        max_attempts: conditional-write rounds before giving up on a busy user.
        """
        self.grouper = grouper
        self.states = states
        self.publish = publish
        self.max_attempts = max_attempts

    def receive(self, message: Message) -> list[str]:
        """Apply one message; return the ids of the sessions published by this call."""
        return self._update(message.user_id, lambda s: self.grouper.add(s, message))

    def flush(self) -> list[str]:
        """Close every session silent for ``idle`` and publish outboxes (run it on a schedule)."""
        published: list[str] = []
        for user_id in self.states.users():
            published += self._update(user_id, self.grouper.expire)
        return published

    def _update(
        self,
        user_id: str,
        step: Callable[[OpenSession | None], tuple[OpenSession | None, list[ClosedSession]]],
    ) -> list[str]:
        for _ in range(self.max_attempts):
            state, generation = self.states.get(user_id)
            new_open, closed = step(state.open)
            outbox = [*state.outbox, *closed]
            if new_open == state.open and not closed:
                return self._drain(user_id, outbox, new_open, generation) if outbox else []
            try:
                generation = self.states.put(user_id, UserState(new_open, outbox), generation)
            except PreconditionFailed:
                continue
            return self._drain(user_id, outbox, new_open, generation)
        raise PreconditionFailed(f"webhook state of {user_id} stayed busy")

    def _drain(
        self, user_id: str, outbox: list[ClosedSession], open_: OpenSession | None, generation: int
    ) -> list[str]:
        done: list[ClosedSession] = []
        published: list[str] = []
        for session in outbox:
            try:
                self.publish(session)
                published.append(session.session_id)
            except PermanentError as exc:  # the event can never be accepted: drop, loudly
                log.error("closed session dropped: %s", exc,
                          extra={"user_id": user_id, "session_id": session.session_id})
            except Exception as exc:  # noqa: BLE001 - stays in the outbox, retried next call
                log.warning("publishing failed; kept in the outbox: %s", type(exc).__name__,
                            extra={"user_id": user_id, "session_id": session.session_id})
                break
            done.append(session)
        if done:
            try:
                self.states.put(user_id, UserState(open_, outbox[len(done):]), generation)
            except PreconditionFailed:
                pass  # a concurrent call re-reads the outbox; republishing is a duplicate
        return published
