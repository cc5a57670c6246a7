"""The Python API for people who embed memrepo: ``memrepo.open(store_url, user_id)``.

::

    import memrepo
    memory = memrepo.open("file:///var/memrepo", "u-123")
    memory.write_session({"session_id": "s1", "occurred_at": "...", "turns": [...]})
    ctx = memory.context([{"role": "user", "content": "How is Sarah?"}], max_tokens=1500)
    print(ctx.text, ctx.tokens_used, ctx.engine)

    # the two calls known from DiffMem
    memory.process_and_commit_session("Ana: hi\\nBot: hello", session_id="2024-05-01-am")
    memory.get_context([{"role": "user", "content": "..."}])

    # operate it like code (docs/operations.md)
    memory.revert("2024-05-01-am")  # undo one session as a new commit
    memory.rebuild()  # replay every transcript with the current writer
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memrepo import bootstrap
from memrepo.conversation import parse_conversation
from memrepo.errors import InvalidEvent
from memrepo.events import SessionEnded, parse_session_ended
from memrepo.ids import validate_user_id
from memrepo.retrieval.service import ContextResult
from memrepo.settings import Settings
from memrepo.writer.service import WriteResult

if TYPE_CHECKING:
    from memrepo.operations.rebuild import Progress, RebuildResult
    from memrepo.operations.revert import RevertResult

_ASSISTANT_NAMES = frozenset({"bot", "ai", "assistant", "agent"})
_LINE = re.compile(r"^(?P<speaker>[^:\n]{1,100}):\s?(?P<content>.*)$")


def parse_transcript_text(text: str) -> list[dict[str, str]]:
    """Split a plain transcript (``Speaker: text`` lines) into turns.

    The speakers ``user``/``assistant`` (any case) keep those roles, and ``bot``/``ai`` are the
    assistant; otherwise the first speaker is the user and the others are ``other``. Lines
    without a ``Speaker:`` prefix continue the
    previous turn.

    Raises:
        InvalidEvent: the text holds no ``Speaker: text`` line.
    """
    turns: list[dict[str, str]] = []
    first: str | None = None
    for line in text.replace("\r\n", "\n").split("\n"):
        match = _LINE.match(line)
        if match and match["speaker"].strip():
            speaker = match["speaker"].strip()
            first = first or speaker
            low = speaker.lower()
            if low in ("user", "assistant"):
                role = low
            elif low in _ASSISTANT_NAMES:
                role = "assistant"
            else:
                role = "user" if speaker == first else "other"
            turns.append({"speaker": speaker, "role": role, "content": match["content"]})
        elif turns:
            turns[-1]["content"] += "\n" + line
    if not turns:
        raise InvalidEvent("conversation text has no 'Speaker: text' line")
    return turns


class Memory:
    """One user's memory on one store. Build it with :func:`open`."""

    def __init__(self, settings: Settings, user_id: str) -> None:
        """Args:
        settings: the configuration (store URL, limits, engines).
        user_id: the user (validated, see :mod:`memrepo.ids`).
        """
        self.settings = settings
        self.user_id = validate_user_id(user_id)

    def write_session(self, event: SessionEnded | dict[str, Any]) -> WriteResult:
        """Commit one session (idempotent by session id) and save the bundle.

        Args:
            event: a :class:`SessionEnded` or its JSON dict (``user_id`` may be omitted; a
                missing ``occurred_at`` means now).

        Raises:
            InvalidEvent, SessionConflict: permanent errors. StoreUnavailable,
            ConflictRetriesExhausted: transient ones (retry).
        """
        if not isinstance(event, SessionEnded):
            if not isinstance(event, dict):
                raise InvalidEvent(
                    f"event must be a SessionEnded or a dict, got {type(event).__name__}"
                )
            event = parse_session_ended(
                {"user_id": self.user_id, **event},
                max_transcript_bytes=self.settings.max_transcript_bytes,
                default_occurred_at=datetime.now(UTC),
            )
        if event.user_id != self.user_id:
            raise InvalidEvent(f"event is for user {event.user_id!r}, not {self.user_id!r}")
        return bootstrap.writer(self.settings).write(event)

    def context(
        self, conversation: Sequence[dict[str, str]], max_tokens: int | None = None
    ) -> ContextResult:
        """Return the context for ``conversation`` within ``max_tokens`` tokens (cl100k_base).

        Raises:
            InvalidRequest: a bad conversation or budget.
        """
        messages = parse_conversation(conversation)
        return bootstrap.retriever(self.settings).context(
            self.user_id,
            messages,
            self.settings.default_max_tokens if max_tokens is None else max_tokens,
        )

    def process_and_commit_session(
        self, conversation_text: str, session_id: str, occurred_at: datetime | None = None
    ) -> WriteResult:
        """DiffMem's call: commit a plain ``Speaker: text`` transcript as one session.

        Args:
            conversation_text: ``Speaker: text`` lines (see :func:`parse_transcript_text`).
            session_id: the session id (see :mod:`memrepo.ids`).
            occurred_at: when the session happened (default: now, UTC).

        Raises:
            InvalidEvent: the text or id is not valid.
        """
        if not isinstance(conversation_text, str):
            raise InvalidEvent(
                f"conversation_text must be a string, got {type(conversation_text).__name__}"
            )
        return self.write_session(
            {
                "session_id": session_id,
                "occurred_at": (occurred_at or datetime.now(UTC)).isoformat(),
                "turns": parse_transcript_text(conversation_text),
            }
        )

    def export(self) -> bytes | None:
        """Return the user's memory as one git bundle (``git clone -b user/<id> FILE`` reads it).

        Returns ``None`` when the user has no memory. (GDPR/CCPA access and portability.)

        Raises:
            StoreUnavailable: a transient store failure.
        """
        return bootstrap.repos(self.settings).export(self.user_id)

    def delete(self) -> int:
        """Delete every stored object of this user, noncurrent versions included, and nothing else.

        Returns:
            The number of object versions deleted. (GDPR/CCPA erasure.)

        Raises:
            StoreUnavailable: a transient store failure.
        """
        return bootstrap.repos(self.settings).delete(self.user_id)

    def revert(self, session_id: str) -> RevertResult:
        """Undo one session as a new commit (``Reverts-Session`` trailer); the history keeps both.

        Idempotent: reverting a reverted session returns ``status="already-reverted"``. See
        docs/operations.md.

        Args:
            session_id: the session to undo (see :mod:`memrepo.ids`).

        Returns:
            The :class:`~memrepo.operations.revert.RevertResult`: status, the reverted and the
            revert commit, the store generation after the save, the files changed.

        Raises:
            InvalidEvent: ``session_id`` breaks the id rules. SessionNotFound: no commit carries
                ``session_id``. RevertConflict: later sessions
                changed the same lines (nothing is saved). StoreUnavailable,
                ConflictRetriesExhausted: transient failures (retry).
        """
        from memrepo.operations.revert import revert

        return revert(bootstrap.changer(self.settings), self.user_id, session_id)

    def rebuild(
        self, *, checkpoint_every: int = 5, on_progress: Callable[[Progress], None] | None = None
    ) -> RebuildResult:
        """Replay every archived transcript with the configured writer onto a new history.

        The new lineage is merged over the old tip, so nothing is lost; an interrupted rebuild
        resumes from its checkpoint (every ``checkpoint_every`` sessions). See docs/operations.md.

        Args:
            checkpoint_every: sessions replayed between two checkpoints (at least 1).
            on_progress: called with a :class:`~memrepo.operations.rebuild.Progress` after the
                start, each replayed session and the final save.

        Returns:
            The :class:`~memrepo.operations.rebuild.RebuildResult`: sessions replayed, how many
            came from a checkpoint, the new tip and the tip it replaced, seconds taken.

        Raises:
            NothingToRebuild: no memory or no transcript. CorruptTranscript: an archived
                transcript that cannot be parsed back. RebuildInterrupted: a concurrent
                rebuild or revert (run again). StoreUnavailable, ConflictRetriesExhausted,
                GitError, LLMError: transient failures; the next call resumes.
        """
        rebuilder = bootstrap.rebuilder(self.settings, checkpoint_every=checkpoint_every)
        return rebuilder.rebuild(self.user_id, on_progress=on_progress)

    def get_context(
        self, messages: Sequence[dict[str, str]], max_tokens: int | None = None
    ) -> ContextResult:
        """DiffMem's call: the same as :meth:`context`."""
        return self.context(messages, max_tokens)


def open(store_url: str | None = None, user_id: str = "", **settings: Any) -> Memory:  # noqa: A001
    """Return the :class:`Memory` of ``user_id`` on the store at ``store_url``.

    Args:
        store_url: ``gs://bucket/prefix`` or ``file:///path`` (default: the settings default).
        user_id: the user.
        **settings: any other :class:`~memrepo.settings.Settings` field.

    Raises:
        InvalidEvent: invalid user id. pydantic.ValidationError: invalid settings.
    """
    values = {**settings, **({"store_url": store_url} if store_url else {})}
    return Memory(Settings(**values), user_id)
