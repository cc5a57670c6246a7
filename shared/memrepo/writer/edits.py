"""Fact edits on memory files, applied in code: the model proposes operations, never file text.

A memory file (an entity or ``profile.md``) is front matter plus a Markdown body::

    # Sarah

    ## Current
    - Ana's younger sister.
    - Works as a nurse at St. Mary's hospital.      <- replace_fact edits this line in place

    ## Notes

    ### 2024-05-01
    - Started at the bakery on Monday.               <- add_fact section="notes" adds under the
                                                        session's dated heading

Operations (:class:`FactOp`):

* ``add_fact``: add ``new`` under ``## Current`` (``section="current"``: a standing fact) or under
  ``### <session date>`` in ``## Notes`` (``section="notes"``: an event); a fact already in the
  file (same words, or nearly) is not added again.
* ``replace_fact``: replace the bullet matching ``old`` with ``new`` *in place* (the old value
  stays in git history); when ``old`` is not found nothing is deleted and ``new`` is added.
* ``remove_fact``: delete the bullet matching ``old`` (git history keeps it).

Matching is on bullet lines only (never headings or front matter): the same text after
normalisation, else the only bullet containing it, else the closest bullet by
:class:`difflib.SequenceMatcher` ratio at or above :data:`MATCH_RATIO`. Every text from a model
goes through :func:`clean_fact` / :func:`clean_name` first: one line, no Markdown structure,
bounded length.
"""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

MAX_FACT_CHARS = 400
MAX_NAME_CHARS = 80
MATCH_RATIO = 0.85
DUPLICATE_RATIO = 0.95
CURRENT = "## Current"
NOTES = "## Notes"

_SPACE = re.compile(r"\s+")
_NUMBER = re.compile(r"\d+")
_BULLET = re.compile(r"^(?P<indent>\s*)[-*] (?P<text>.*)$")
_DATE = re.compile(r"^### (\d{4}-\d{2}-\d{2})\s*$")
_MARKER = re.compile(r"^_\((?P<n>\d+) older lines condensed; see `git log -p` of this file\)_$")


class FactOp(BaseModel):
    """One edit of a memory file's facts (see the module docstring)."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["add_fact", "replace_fact", "remove_fact"]
    old: str | None = Field(
        default=None,
        max_length=MAX_FACT_CHARS,
        description="replace/remove: the fact line as in the file",
    )
    new: str | None = Field(
        default=None, max_length=MAX_FACT_CHARS, description="add/replace: one short fact sentence"
    )
    section: Literal["current", "notes"] = Field(
        default="current",
        description="current: a standing fact (job, home, relationship); notes: a dated event",
    )

    @model_validator(mode="after")
    def _needs(self) -> FactOp:
        if self.op in ("add_fact", "replace_fact") and not (self.new or "").strip():
            raise ValueError(f"{self.op} needs 'new'")
        if self.op in ("replace_fact", "remove_fact") and not (self.old or "").strip():
            raise ValueError(f"{self.op} needs 'old'")
        return self


@dataclass
class EditStats:
    """What applying edits did, counted per outcome."""

    added: int = 0
    replaced: int = 0
    removed: int = 0
    duplicates: int = 0
    not_found: int = 0
    empty: int = 0
    touched: bool = field(default=False)

    def merge(self, other: EditStats) -> None:
        """Add ``other``'s counts to these."""
        self.added += other.added
        self.replaced += other.replaced
        self.removed += other.removed
        self.duplicates += other.duplicates
        self.not_found += other.not_found
        self.empty += other.empty
        self.touched = self.touched or other.touched


def _printable(text: str) -> str:
    return "".join(" " if unicodedata.category(ch)[0] == "C" else ch for ch in text)


def clean_fact(text: str | None, limit: int = MAX_FACT_CHARS) -> str:
    """Return ``text`` as one safe bullet text: one line, no leading Markdown, at most ``limit``.

    Control characters and line breaks become spaces, runs of spaces collapse, leading ``#``,
    ``-``, ``*``, ``>`` and ``|`` are removed (so a fact can never become a heading, a front-matter
    fence or a table), HTML comments are neutralised. Longer text is refused upstream by the
    schema; here it is cut with an ellipsis as a last resort.

    Args:
        text: a fact (or summary) from a model; ``None`` counts as empty.
        limit: the maximum length in characters.

    Returns:
        The cleaned text, possibly empty (callers skip empty facts).
    """
    text = _SPACE.sub(" ", _printable(text or "")).strip()
    text = text.lstrip("#-*>|+ \t").replace("<!--", "<! --").replace("-->", "-- >").strip()
    if len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def clean_name(text: str | None) -> str | None:
    """Return an entity name fit for a title and the index, or ``None`` for an unusable one.

    Refused: empty, longer than :data:`MAX_NAME_CHARS`, containing ``/``, ``\\`` or ``..`` (names
    that look like paths), or holding no letter or digit.

    Args:
        text: a name from a model.

    Returns:
        The name on one line without Markdown emphasis, or ``None``.
    """
    name = _SPACE.sub(" ", _printable(text or "")).strip().strip("#*_`|").strip()
    if not name or len(name) > MAX_NAME_CHARS or "/" in name or "\\" in name or ".." in name:
        return None
    if not any(ch.isalnum() for ch in name):
        return None
    return name


def normalise(text: str) -> str:
    """Return the comparison form of a fact: lowercase, single spaces, no trailing punctuation."""
    text = _SPACE.sub(" ", text.lower().replace("’", "'")).strip()
    return text.rstrip(".;,!? ").strip()


def _bullets(lines: list[str]) -> list[tuple[int, str]]:
    """Return ``(index, normalised text)`` of every bullet line that may be matched."""
    found = []
    for i, line in enumerate(lines):
        match = _BULLET.match(line)
        if match and not match["text"].startswith("("):
            found.append((i, normalise(match["text"])))
    return found


def find_fact(lines: list[str], text: str, *, ratio: float = MATCH_RATIO) -> int | None:
    """Return the index of the bullet line that matches ``text`` (see the module docstring).

    Args:
        lines: the body's lines.
        text: the fact to find (an ``old`` value).
        ratio: the minimum similarity of a fuzzy match, 0-1.

    Returns:
        The line index, or ``None`` when no bullet matches.
    """
    wanted = normalise(text)
    if not wanted:
        return None
    bullets = _bullets(lines)
    for i, have in bullets:
        if have == wanted:
            return i
    if len(wanted) >= 12:
        containing = [
            i for i, have in bullets if wanted in have or (len(have) >= 12 and have in wanted)
        ]
        if len(containing) == 1:
            return containing[0]
    best, best_ratio = None, ratio
    for i, have in bullets:
        score = difflib.SequenceMatcher(None, have, wanted).ratio()
        if score >= best_ratio:
            best, best_ratio = i, score
    return best


def _duplicate(lines: list[str], text: str) -> int | None:
    """Return the bullet that already says ``text``: same words, or nearly (same numbers)."""
    wanted = normalise(text)
    numbers = _NUMBER.findall(wanted)
    for i, have in _bullets(lines):
        if have == wanted:
            return i
        if _NUMBER.findall(have) != numbers:
            continue  # "ran 10 km" and "ran 20 km" are different facts
        if difflib.SequenceMatcher(None, have, wanted).ratio() >= DUPLICATE_RATIO:
            return i
    return None


def _section_end(lines: list[str], start: int, levels: tuple[str, ...]) -> int:
    """Return the index after the section starting at ``start`` (next heading of ``levels``)."""
    for i in range(start + 1, len(lines)):
        if lines[i].startswith(levels):
            return i
    return len(lines)


def _find_heading(
    lines: list[str], heading: str, start: int = 0, end: int | None = None
) -> int | None:
    stop = len(lines) if end is None else end
    for i in range(start, stop):
        if lines[i].strip().lower() == heading.lower():
            return i
    return None


def _insert_block(lines: list[str], at: int, block: list[str]) -> None:
    """Insert ``block`` at ``at`` with one blank line before and after it."""
    before = [""] if at > 0 and lines[at - 1].strip() else []
    after = [""] if at < len(lines) and lines[at].strip() else []
    lines[at:at] = [*before, *block, *after]


def _append_to(lines: list[str], start: int, end: int, bullet: str) -> None:
    """Insert ``bullet`` after the last non-blank line of ``lines[start:end]``."""
    last = start
    for i in range(start, end):
        if lines[i].strip():
            last = i
    lines.insert(last + 1, bullet)


def _add(lines: list[str], fact: str, section: str, date: str) -> None:
    bullet = f"- {fact}"
    if section == "current":
        at = _find_heading(lines, CURRENT)
        if at is None:
            first = next((i for i, line in enumerate(lines) if line.startswith("## ")), len(lines))
            _insert_block(lines, first, [CURRENT, bullet])
            return
        _append_to(lines, at, _section_end(lines, at, ("# ", "## ")), bullet)
        return
    notes = _find_heading(lines, NOTES)
    if notes is None:
        while lines and not lines[-1].strip():
            lines.pop()
        _insert_block(lines, len(lines), [NOTES, "", f"### {date}", bullet])
        return
    end = _section_end(lines, notes, ("# ", "## "))
    heading = f"### {date}"
    at = _find_heading(lines, heading, notes, end)
    if at is not None:
        _append_to(lines, at, _section_end(lines, at, ("# ", "## ", "### ")), bullet)
        return
    later = next(
        (i for i in range(notes + 1, end) if (m := _DATE.match(lines[i])) and m.group(1) > date),
        end,
    )
    _insert_block(lines, later, [heading, bullet])


def apply_ops(body: str, ops: Iterable[FactOp], date: str) -> tuple[str, EditStats]:
    """Apply ``ops`` to a file body; return the new body and what happened.

    Args:
        body: the Markdown body (no front matter).
        ops: the edits, applied in order.
        date: the session date ``YYYY-MM-DD``, the heading of facts added to the notes.

    Returns:
        ``(body, stats)``; the body ends with exactly one newline.
    """
    lines = body.rstrip("\n").split("\n") if body.strip() else []
    stats = EditStats()
    for op in ops:
        new = clean_fact(op.new) if op.new else ""
        old = clean_fact(op.old) if op.old else ""
        if op.op == "add_fact":
            if not new:
                stats.empty += 1
            elif _duplicate(lines, new) is not None:
                stats.duplicates += 1
            else:
                _add(lines, new, op.section, date)
                stats.added += 1
            continue
        at = find_fact(lines, old) if old else None
        if op.op == "remove_fact":
            if at is None:
                stats.not_found += 1
            else:
                del lines[at]
                stats.removed += 1
            continue
        if not new:
            stats.empty += 1
            continue
        dup = _duplicate(lines, new)
        if at is None:
            stats.not_found += 1
            if dup is None:
                _add(lines, new, op.section, date)
                stats.added += 1
            else:
                stats.duplicates += 1
        elif dup is not None and dup != at:
            del lines[at]  # the new value is already there: drop the stale line
            stats.replaced += 1
        else:
            match = _BULLET.match(lines[at])
            if match and normalise(match["text"]) == normalise(new):
                stats.duplicates += 1
            else:
                lines[at] = f"{match['indent'] if match else ''}- {new}"
                stats.replaced += 1
    stats.touched = bool(stats.added or stats.replaced or stats.removed)
    return "\n".join(lines).rstrip("\n") + "\n", stats


def render_sections(
    title: str, current: Iterable[str], notes: Iterable[tuple[str, Iterable[str]]]
) -> str:
    """Return a body with ``# title``, ``## Current`` bullets and dated ``## Notes``.

    Args:
        title: the heading text (an entity's name).
        current: standing facts.
        notes: ``(YYYY-MM-DD, facts)`` pairs, in any order (rendered oldest first).
    """
    lines = [f"# {clean_name(title) or 'Untitled'}", ""]
    facts = [f"- {f}" for f in (clean_fact(x) for x in current) if f]
    if facts:
        lines += [CURRENT, *facts, ""]
    dated = sorted((d, [clean_fact(x) for x in xs]) for d, xs in notes)
    blocks = [(d, [f"- {f}" for f in xs if f]) for d, xs in dated]
    blocks = [(d, xs) for d, xs in blocks if xs]
    if blocks:
        lines += [NOTES, ""]
        for d, xs in blocks:
            lines += [f"### {d}", *xs, ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def condense(body: str, max_bytes: int) -> tuple[str, int]:
    """Drop the oldest bullets until ``body`` fits in ``max_bytes``, saying so in the file.

    Order of dropping: notes bullets oldest first, then bullets of other sections (for example a
    deterministic ``## Sessions`` list), then current facts from the top. Empty dated headings are
    removed. A marker line under the title counts the lines dropped so far and points to
    ``git log -p``, so nothing leaves the file silently.

    Args:
        body: a Markdown body (no front matter).
        max_bytes: the UTF-8 size the result must not exceed.

    Returns:
        ``(body, dropped)``: the condensed body and the number of lines dropped now (0 when it
        already fitted).
    """
    if len(body.encode()) <= max_bytes:
        return body, 0
    lines = body.rstrip("\n").split("\n")
    previous = 0
    marker_at = next((i for i, line in enumerate(lines) if _MARKER.match(line)), None)
    if marker_at is not None:
        previous = int(_MARKER.match(lines[marker_at])["n"])  # type: ignore[index]
        del lines[marker_at]
        if marker_at < len(lines) and not lines[marker_at].strip():
            del lines[marker_at]

    def section_of(i: int) -> str:
        for j in range(i, -1, -1):
            if lines[j].startswith("## "):
                return lines[j].strip().lower()
        return ""

    dropped = 0
    while True:
        candidates = [i for i, _ in _bullets(lines)]
        notes = [i for i in candidates if section_of(i) == NOTES.lower()]
        other = [i for i in candidates if section_of(i) not in (NOTES.lower(), CURRENT.lower())]
        current = [i for i in candidates if section_of(i) == CURRENT.lower()]
        order = notes or other or current
        title_at = next((i for i, line in enumerate(lines) if line.startswith("# ")), -1)
        marker = f"_({previous + dropped} older lines condensed; see `git log -p` of this file)_"
        shown = previous + dropped > 0
        rendered = [*lines[: title_at + 1], "", marker, *lines[title_at + 1 :]] if shown else lines
        text = "\n".join(_tidy(rendered)).rstrip("\n") + "\n"
        if len(text.encode()) <= max_bytes or not order:
            return text, dropped
        del lines[order[0]]
        dropped += 1


def _tidy(lines: list[str]) -> list[str]:
    """Remove dated headings and a ``## Notes`` left without bullets, and runs of blank lines."""
    out: list[str] = []
    for i, line in enumerate(lines):
        if _DATE.match(line):
            nxt = next((x for x in lines[i + 1 :] if x.strip()), "")
            if not _BULLET.match(nxt):
                continue
        if line.strip().lower() == NOTES.lower():
            rest = lines[i + 1 : _section_end(lines, i, ("# ", "## "))]
            if not any(_BULLET.match(x) for x in rest):
                continue
        if not line.strip() and (not out or not out[-1].strip()):
            continue
        out.append(line)
    return out
