"""The archived transcript of a session (``sessions/YYYY/MM/<id>.md``): render and parse.

The file is the event log from which memory can be rebuilt, so the format is lossless::

    ---
    session_id: "conv-26-session_1"
    occurred_at: "2023-05-08T13:56:00+00:00"
    digest: "sha256:..."
    metadata: {...}
    ---
    # Session conv-26-session_1 · 2023-05-08 13:56

    - **Caroline** (user, D1:1): first line of the turn
      continuation lines are indented by two spaces
    - **Melanie** (other): ...

One turn starts each ``- **`` line, so ``grep -n`` on a word yields the turn it was said in.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from memrepo import frontmatter
from memrepo.events import SessionEnded, Turn, parse_session_ended
from memrepo.text import split_lines

_FAR_FUTURE = datetime.max.replace(tzinfo=UTC) - timedelta(days=2)

_TURN = re.compile(
    r"^- \*\*(?P<speaker>.+?)\*\* \((?P<role>user|assistant|other)(?:, (?P<turn_id>[^)]*))?\): ?"
    r"(?P<content>.*)$"
)


def render_turn(turn: Turn) -> str:
    """Return the Markdown lines of one turn (continuation lines indented by two spaces)."""
    label = turn.role if turn.turn_id is None else f"{turn.role}, {turn.turn_id}"
    first, *rest = turn.content.split("\n")
    lines = [f"- **{turn.speaker}** ({label}): {first}"]
    lines += [f"  {line}" for line in rest]
    return "\n".join(lines)


def render(event: SessionEnded) -> str:
    """Return the transcript file text of ``event``."""
    meta: dict[str, Any] = {
        "session_id": event.session_id,
        "occurred_at": event.occurred_at.isoformat(),
        "digest": event.digest(),
    }
    if event.metadata:
        meta["metadata"] = event.metadata
    heading = f"# Session {event.session_id} · {event.occurred_at:%Y-%m-%d %H:%M}\n\n"
    return frontmatter.render(meta, heading + "\n".join(render_turn(t) for t in event.turns) + "\n")


def parse(text: str, user_id: str) -> SessionEnded:
    """Rebuild the :class:`SessionEnded` a transcript file was rendered from.

    Raises:
        InvalidEvent: the file does not hold a valid session.
    """
    meta, body = frontmatter.split(text)
    turns: list[dict[str, Any]] = []
    for line in split_lines(body):
        match = _TURN.match(line)
        if match:
            turns.append({**match.groupdict(), "content": match["content"]})
        elif line.startswith("  ") and turns:
            turns[-1]["content"] += "\n" + line[2:]
    return parse_session_ended(
        {
            "user_id": user_id,
            "session_id": meta.get("session_id"),
            "occurred_at": meta.get("occurred_at"),
            "turns": turns,
            "metadata": meta.get("metadata") or {},
        },
        now=_FAR_FUTURE,  # an archived session was valid when written
        max_transcript_bytes=1 << 62,
    )
