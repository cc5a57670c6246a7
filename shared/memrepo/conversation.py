"""The conversation a bot sends for context: a validated list of ``{role, content}`` messages."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from memrepo.errors import InvalidRequest

MAX_MESSAGES = 500
MAX_MESSAGE_CHARS = 100_000


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    role: Literal["user", "assistant", "system", "other"]
    content: str = Field(max_length=MAX_MESSAGE_CHARS)


_MESSAGES = TypeAdapter(list[Message])


def parse_conversation(value: Any) -> list[dict[str, str]]:
    """Return ``value`` as a list of ``{"role", "content"}`` dicts, oldest first.

    Raises:
        InvalidRequest: ``value`` is not a list of ``{role, content}`` objects (role one of
            user/assistant/system/other), or has more than :data:`MAX_MESSAGES` messages.
    """
    if not isinstance(value, list):
        raise InvalidRequest("conversation must be a list of {role, content} objects")
    if len(value) > MAX_MESSAGES:
        raise InvalidRequest(f"conversation has {len(value)} messages; at most {MAX_MESSAGES}")
    try:
        messages = _MESSAGES.validate_python(value)
    except ValidationError as exc:
        first = exc.errors()[0]
        index, *field = first["loc"]
        where = f"conversation[{index}]" + "".join(f".{f}" for f in field)
        raise InvalidRequest(f"{where}: {first['msg']}") from exc
    return [{"role": m.role, "content": m.content} for m in messages]
