"""Undoing one commit's change to a file that later commits also changed (a revert's 3-way step).

``git revert`` merges line hunks with context: an entry appended after the reverted one, or a
counter bumped by every session, makes it stop with a conflict although nothing the reverted
session wrote was changed since. Memory files are mostly append-only logs under a front matter of
derived fields, so for each file git leaves conflicted this module retries with finer rules, given
the three versions ``base`` (after the reverted commit), ``theirs`` (before it) and ``ours`` (now):

* **body, line by line, without context**: each edit that turns ``base`` into ``theirs`` (the
  revert's intent) is applied to ``ours`` where the lines it replaces are still there, unchanged
  and contiguous. Lines a later session edited, removed, or inserted inside the block make the
  edit :class:`Unresolved`; so does an insertion whose neighbours both moved.
* **front matter, field by field** (``key: JSON`` lines, see :mod:`memrepo.frontmatter`), when all
  three versions round-trip exactly: a field the revert does not change keeps ``ours``; a field
  nobody changed since takes ``theirs``; when both changed, integers take the delta
  (``ours + theirs - base``: a session counter goes down by one), lists drop what the reverted
  session added and regain what it removed, and ``last_*`` fields keep ``ours`` (a later session
  set them since). Any other field both sides changed is :class:`Unresolved`.

Files the reverted session *created* and later sessions changed get two more rules, because the
session's share of such a file is not "the whole file":

* ``timeline/YYYY-MM.md``: the session's dated entry (its ``## … · <session id>`` block) is
  removed; the file goes when no entry is left (:func:`revert_timeline`, also used for
  timeline files the session only changed);
* any other file: the lines that name the session id (a person's ``- date · <id> · …`` entry)
  are taken as the session's share and reverted as above; the rest (front matter, heading, lines
  of later sessions) stays. A file with no such line is :class:`Unresolved`.

``index.md`` is not merged: the caller regenerates it from the entity files.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher
from typing import Any

from memrepo import frontmatter


class Unresolved(Exception):  # noqa: N818 - internal signal, turned into RevertConflict
    """Raised when a file's revert touches lines or fields a later commit changed."""


_MISSING: Any = object()


def _revert_lines(base: list[str], theirs: list[str], ours: list[str]) -> list[str]:
    """Apply the edits ``base → theirs`` to ``ours`` without context (see the module docstring)."""
    mapping: dict[int, int] = {}
    for a, b, size in SequenceMatcher(None, base, ours, autojunk=False).get_matching_blocks():
        for k in range(size):
            mapping[a + k] = b + k
    edits: list[tuple[int, int, list[str]]] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, base, theirs, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        replacement = theirs[j1:j2]
        if i2 > i1:
            where = [mapping.get(i) for i in range(i1, i2)]
            if any(w is None for w in where):
                raise Unresolved(f"lines {i1 + 1}-{i2} were changed by a later commit")
            first = int(where[0])  # type: ignore[arg-type]
            if where != list(range(first, first + len(where))):
                raise Unresolved(f"a later commit inserted lines inside lines {i1 + 1}-{i2}")
            edits.append((first, first + len(where), replacement))
        else:
            before = mapping.get(i1 - 1) if i1 > 0 else -1
            after = mapping.get(i1) if i1 < len(base) else len(ours)
            if before is None and after is None:
                raise Unresolved(f"the lines around line {i1 + 1} were changed by a later commit")
            if before is not None and after is not None and after != before + 1:
                raise Unresolved(f"a later commit inserted lines where line {i1 + 1} goes back")
            position = before + 1 if before is not None else int(after)  # type: ignore[arg-type]
            edits.append((position, position, replacement))
    result = list(ours)
    end = len(ours) + 1
    for start, stop, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        if stop > end:
            raise Unresolved("two edits of the revert overlap")
        result[start:stop] = replacement
        end = start
    return result


def _merge_field(key: str, base: Any, theirs: Any, ours: Any) -> Any:
    if theirs == base:
        return ours
    if ours == base:
        return theirs
    if ours == theirs:
        return ours
    if all(isinstance(v, int) and not isinstance(v, bool) for v in (base, theirs, ours)):
        return ours + theirs - base
    if all(isinstance(v, list) for v in (base, theirs, ours)):
        removed = [x for x in base if x not in theirs]
        added = [x for x in theirs if x not in base]
        return [x for x in ours if x not in removed] + [x for x in added if x not in ours]
    if key.startswith("last_") and ours is not _MISSING:
        return ours
    raise Unresolved(f"front matter field {key!r} was changed by a later commit")


def _round_trips(text: str) -> bool:
    meta, body = frontmatter.split(text)
    return bool(meta) and frontmatter.render(meta, body) == text


def revert_text(base: str, theirs: str, ours: str) -> str:
    """Return ``ours`` with the change ``theirs → base`` undone (see the module docstring).

    Args:
        base: the file after the reverted commit.
        theirs: the file before the reverted commit.
        ours: the file now.

    Raises:
        Unresolved: a later commit changed lines or fields the revert must change.
    """
    if all(_round_trips(t) for t in (base, theirs, ours)):
        (bm, bb), (tm, tb), (om, ob) = (frontmatter.split(t) for t in (base, theirs, ours))
        meta: dict[str, Any] = {}
        for key in [*om, *(k for k in tm if k not in om)]:
            value = _merge_field(
                key, bm.get(key, _MISSING), tm.get(key, _MISSING), om.get(key, _MISSING)
            )
            if value is not _MISSING:
                meta[key] = value
        body = _revert_lines(bb.splitlines(True), tb.splitlines(True), ob.splitlines(True))
        return frontmatter.render(meta, "".join(body))
    lines = _revert_lines(base.splitlines(True), theirs.splitlines(True), ours.splitlines(True))
    return "".join(lines)


_TIMELINE_ENTRY = re.compile(r"^## \d{4}-\d{2}-\d{2} ", re.MULTILINE)


def _timeline_blocks(text: str) -> tuple[str, list[str]]:
    starts = [m.start() for m in _TIMELINE_ENTRY.finditer(text)]
    head = text[: starts[0]] if starts else text
    ends = [*starts[1:], len(text)]
    return head, [text[s:e] for s, e in zip(starts, ends, strict=True)]


def _owned_by(block: str, session_id: str) -> bool:
    return block.split("\n", 1)[0].endswith(f" · {session_id}")


def revert_timeline(base: str, ours: str, session_id: str, *, created: bool) -> str | None:
    """Return the timeline file ``ours`` without the session's entry (``None``: delete the file).

    Args:
        base: the file after the reverted commit (holds the session's entry).
        ours: the file now.
        session_id: the reverted session.
        created: the session created the file (it is deleted when no entry is left).

    Raises:
        Unresolved: the entry is missing or was changed since the session wrote it.
    """
    mine = [b for b in _timeline_blocks(base)[1] if _owned_by(b, session_id)]
    head, blocks = _timeline_blocks(ours)
    found = [b for b in blocks if _owned_by(b, session_id)]
    if len(mine) != 1 or len(found) != 1 or found[0].rstrip("\n") != mine[0].rstrip("\n"):
        raise Unresolved(f"the timeline entry of {session_id} was changed by a later commit")
    rest = [b for b in blocks if not _owned_by(b, session_id)]
    if created and not rest:
        return None
    return head.rstrip("\n") + "\n\n" + "\n".join(b.rstrip("\n") + "\n" for b in rest)


def revert_created(path: str, base: str, ours: str, session_id: str) -> str | None:
    """Return ``ours`` without the share of a session that created the file (``None``: delete).

    Raises:
        Unresolved: the session's share cannot be told apart, or was changed since.
    """
    if path.startswith("timeline/"):
        return revert_timeline(base, ours, session_id, created=True)
    names = re.compile(rf"(?<![A-Za-z0-9_.-]){re.escape(session_id)}(?![A-Za-z0-9_-])")
    theirs = "".join(line for line in base.splitlines(True) if not names.search(line))
    if theirs == base:
        raise Unresolved("the session created it, a later commit changed it, and no line of it "
                         "names the session")
    return revert_text(base, theirs, ours)
