"""Resolve a :class:`Plan` into a context under a token budget.

Order: every ``must`` pointer in plan order, then ``optional`` pointers by descending ``score``
(plan order breaks ties). Each block is rendered as ``### <source> — <reason>`` plus its text and
counted with the real tokenizer; a block that does not fit whole is cut at a line boundary and
marked ``cut``; once the budget is spent the rest is skipped. The final text is counted again and
never exceeds ``max_tokens`` (invariant of the retrieval response).
"""

from __future__ import annotations

import logging
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

from memrepo import tokens
from memrepo.retrieval.plan import Plan, Pointer
from memrepo.text import split_lines
from memrepo.workspace import PathOutsideRepo, Workspace

log = logging.getLogger(__name__)

#: Runs a git pointer (``git_diff``/``git_log``) and returns its output text.
GitRunner = Callable[[Workspace, Pointer], str]

MIN_USEFUL_TOKENS = 24
#: Wall-clock limit of one git pointer, in seconds (lowered to the time left before a deadline).
GIT_TIMEOUT_S = 2.0
#: Output kept from one git pointer, in bytes (more than the largest budget holds).
GIT_MAX_OUTPUT_BYTES = 256_000
#: A git pointer is skipped with less time than this left before the deadline, in seconds.
MIN_GIT_S = 0.05
CUT_NOTE = "[… cut to fit the token budget]\n"


@dataclass(frozen=True)
class Block:
    """One resolved piece of context."""

    source: str
    kind: str
    tokens: int
    reason: str
    text: str
    cut: bool = False


@dataclass(frozen=True)
class Resolved:
    """The context text, its blocks and the tokens it uses."""

    text: str
    blocks: tuple[Block, ...]
    tokens_used: int
    skipped: int


class PointerUnreadable(Exception):
    """Raised by a git runner when a pointer cannot be read (refused, failed, timed out)."""


def sandbox_git_command(pointer: Pointer) -> str:
    """Return the ``run`` command string of a git pointer, every argument ``shlex``-quoted.

    Args:
        pointer: a ``git_diff`` pointer (``git diff REV -- PATH``) or a ``git_log`` pointer
            (``git log --stat -N -- PATH``).
    """
    if pointer.kind == "git_diff":
        args = ["git", "diff", "--no-ext-diff", "--no-textconv", "--no-color", str(pointer.rev)]
    else:
        args = ["git", "log", "--no-color", "--stat", f"-{pointer.count or 5}"]
    return shlex.join([*args, "--", pointer.path])


def _default_git(ws: Workspace, pointer: Pointer, *, timeout_s: float = GIT_TIMEOUT_S) -> str:
    """Run a git pointer through the same sandbox as the agent's ``run`` tool, never a shell.

    Raises:
        PathOutsideRepo: the pointer's path leaves the repository.
        PointerUnreadable: the sandbox refused the command, git failed (a revision beyond the
            history) or the time ran out.
    """
    from memrepo.sandbox import Sandbox

    ws.resolve(pointer.path)
    command = sandbox_git_command(pointer)
    result = Sandbox(ws.path, timeout_s=timeout_s, max_output_bytes=GIT_MAX_OUTPUT_BYTES).run(
        command
    )
    if result.refused or result.timed_out or result.exit_code != 0:
        raise PointerUnreadable(f"{command}: {result.output.strip()[-300:]}")
    return result.output


def _read(
    ws: Workspace, pointer: Pointer, git_runner: GitRunner, files: dict[str, list[str] | None]
) -> str | None:
    """Return the pointer's text; ``files`` keeps each file's lines for the rest of the request."""
    if pointer.kind in ("git_diff", "git_log"):
        return git_runner(ws, pointer)
    if pointer.path not in files:
        text = ws.read(pointer.path)
        files[pointer.path] = None if text is None else split_lines(text, keepends=True)
    lines = files[pointer.path]
    if lines is None:
        return None
    if pointer.kind == "file_section":
        return "".join(lines[(pointer.start_line or 1) - 1 : pointer.end_line])
    return "".join(lines)


def render_block(source: str, reason: str, text: str) -> str:
    """Return the context rendering of one block."""
    return f"### {source} — {reason}\n{text.rstrip()}\n"


def resolve(
    ws: Workspace,
    plan: Plan,
    max_tokens: int,
    *,
    git_runner: GitRunner = _default_git,
    deadline: float | None = None,
) -> Resolved:
    """Turn ``plan`` into a context of at most ``max_tokens`` tokens (``cl100k_base``).

    Pointers whose file is missing, outside the repository, or whose git command fails are
    skipped (and counted in ``skipped``), never fatal: a plan is advice, the budget is law.

    Args:
        ws: the hydrated repository (only read).
        plan: the pointers, must-pointers first when resolved.
        max_tokens: the budget of the whole text, separators included.
        git_runner: reads ``git_diff``/``git_log`` pointers; by default through the sandbox.
        deadline: a ``time.monotonic()`` instant: past it, git pointers are skipped (files are
            still read); the default runner's time limit is lowered to the time left.

    Returns:
        The text (blocks joined by a blank line), its blocks, tokens used and pointers skipped.
    """
    must = [p for p in plan.pointers if p.priority == "must"]
    optional = sorted(
        (p for p in plan.pointers if p.priority == "optional"), key=lambda p: -p.score
    )
    blocks: list[Block] = []
    rendered: list[str] = []
    used = 0
    skipped = 0
    seen: set[str] = set()
    files: dict[str, list[str] | None] = {}
    for pointer in [*must, *optional]:
        if pointer.source in seen:
            continue
        seen.add(pointer.source)
        room = max_tokens - used - (1 if rendered else 0)  # the "\n" joining blocks
        if room < MIN_USEFUL_TOKENS:
            skipped += 1
            continue
        try:
            text = _read(ws, pointer, _bounded(git_runner, deadline), files)
        except (PathOutsideRepo, PointerUnreadable, OSError, UnicodeDecodeError) as exc:
            log.info("pointer skipped", extra={"source": pointer.source, "error": str(exc)})
            skipped += 1
            continue
        if not text or not text.strip():
            skipped += 1
            continue
        block_text = render_block(pointer.source, pointer.reason, text)
        # past ``room`` for sure without tokenizing: most candidates once the budget is nearly spent
        over = tokens.at_least(block_text) > room
        cost = room + 1 if over else tokens.count(block_text)
        cut = False
        if cost > room:
            block_text, cost = _cut(block_text, room)
            if not block_text:
                skipped += 1
                continue
            cut = True
        rendered.append(block_text)
        used += cost + (1 if len(rendered) > 1 else 0)
        blocks.append(Block(pointer.source, pointer.kind, cost, pointer.reason, block_text, cut))
    text = "\n".join(rendered)
    total = tokens.count(text)
    while total > max_tokens and blocks:  # joins can merge tokens differently; stay under budget
        blocks.pop()
        rendered.pop()
        text = "\n".join(rendered)
        total = tokens.count(text)
    return Resolved(text=text, blocks=tuple(blocks), tokens_used=total, skipped=skipped)


def _cut(block_text: str, room: int) -> tuple[str, int]:
    """Return ``block_text`` cut at a line boundary plus :data:`CUT_NOTE`, within ``room`` tokens.

    Returns:
        ``(text, tokens)``, or ``("", 0)`` when not even the header and one line fit.
    """
    limit = room - _cut_note_tokens()
    head = block_text.split("\n", 2)
    # not even the header and one line fit (what truncate_lines would find): sure from the word
    # counts (a lower bound of the tokens, see tokens.at_least), else counted
    if len(head) < 3 or sum(tokens.at_least(h) for h in head[:2]) > limit or (
        tokens.count(head[0] + "\n") + tokens.count(head[1] + "\n") > limit
    ):
        return "", 0
    while limit > 0:
        kept, _ = tokens.truncate_lines(block_text, limit)
        if kept.count("\n") < 2:
            break
        cost = tokens.count(kept + CUT_NOTE)
        if cost <= room:
            return kept + CUT_NOTE, cost
        limit -= cost - room
    return "", 0


@cache
def _cut_note_tokens() -> int:
    return tokens.count(CUT_NOTE)


def _bounded(git_runner: GitRunner, deadline: float | None) -> GitRunner:
    """Return ``git_runner`` refusing to start past ``deadline`` (the default one bounded by it)."""
    if deadline is None:
        return git_runner

    def run(ws: Workspace, pointer: Pointer) -> str:
        left = deadline - time.monotonic()
        if left < MIN_GIT_S:
            raise PointerUnreadable(f"{pointer.source}: skipped, the deadline has passed")
        if git_runner is _default_git:
            return _default_git(ws, pointer, timeout_s=min(GIT_TIMEOUT_S, left))
        return git_runner(ws, pointer)

    return run
