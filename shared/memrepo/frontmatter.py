"""Front matter of memory files: a ``---`` block of ``key: <JSON value>`` lines.

Each value is written as JSON, which is also valid YAML flow syntax, so the block reads as YAML to
people and tools, yet parses exactly and safely here without a YAML dependency.
"""

from __future__ import annotations

import json
from typing import Any


def render(meta: dict[str, Any], body: str) -> str:
    """Return a file text: the front matter block of ``meta`` followed by ``body``."""
    lines = ["---"]
    lines += [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in meta.items()]
    lines.append("---")
    return "\n".join(lines) + "\n" + body.lstrip("\n")


def split(text: str) -> tuple[dict[str, Any], str]:
    """Return ``(meta, body)`` of a file text; ``({}, text)`` when it has no front matter.

    Lines that are not ``key: JSON`` are kept as plain strings, so a hand-edited file never
    makes parsing fail.
    """
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 3)
    if end < 0:
        return {}, text
    meta: dict[str, Any] = {}
    for line in text[4:end].splitlines():
        key, sep, raw = line.partition(":")
        if not sep or not key.strip():
            continue
        raw = raw.strip()
        try:
            meta[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            meta[key.strip()] = raw
    return meta, text[end + 5 :]
