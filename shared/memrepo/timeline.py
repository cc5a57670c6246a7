"""Monthly timeline files (``timeline/YYYY-MM.md``): one dated entry per session, in date order.

Each entry starts with ``## YYYY-MM-DD HH:MM · <session_id>`` and a hidden sort key (the UTC
instant), so sessions delivered out of order are still placed by ``occurred_at``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from memrepo.layout import timeline_path
from memrepo.workspace import Workspace

_ENTRY_START = re.compile(r"^## \d{4}-\d{2}-\d{2} ", re.MULTILINE)
_KEY = re.compile(r"<!-- at: (\S+) -->")


@dataclass(frozen=True)
class Entry:
    """A timeline entry of one session."""

    when: datetime
    session_id: str
    text: str

    def render(self) -> str:
        """Return the entry's Markdown, ending with a newline."""
        key = self.when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        return (
            f"## {self.when:%Y-%m-%d %H:%M} · {self.session_id}\n"
            f"<!-- at: {key} -->\n{self.text.strip()}\n"
        )


def insert(ws: Workspace, entry: Entry) -> tuple[str, str]:
    """Return ``(path, text)`` of the month file with ``entry`` inserted in date order.

    An entry for the same session id already in the file is replaced, never duplicated.
    """
    path = timeline_path(entry.when)
    old = ws.read(path) or f"# Timeline {entry.when:%Y-%m}\n\n"
    starts = [m.start() for m in _ENTRY_START.finditer(old)]
    head = old[: starts[0]] if starts else old
    blocks = [old[s:e] for s, e in zip(starts, [*starts[1:], len(old)], strict=False)]
    blocks = [b for b in blocks if f" · {entry.session_id}\n" not in b.split("\n", 1)[0] + "\n"]
    blocks.append(entry.render())

    def sort_key(block: str) -> tuple[str, str]:
        found = _KEY.search(block)
        return (found.group(1) if found else block[3:19], block.split("\n", 1)[0])

    blocks.sort(key=sort_key)
    body = "\n".join(b.rstrip("\n") + "\n" for b in blocks)
    return path, head.rstrip("\n") + "\n\n" + body
