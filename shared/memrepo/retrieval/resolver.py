"""Resolve a :class:`Plan` into a context under a token budget.

Order: every ``must`` pointer in plan order, then ``optional`` pointers by descending ``score``
(plan order breaks ties). Each block is rendered as ``### <source> — <reason>`` plus its text and
counted with the real tokenizer; a block that does not fit whole is cut at a line boundary and
marked ``cut``; once the budget is spent the rest is skipped. The final text is counted again and
never exceeds ``max_tokens`` (invariant of the retrieval response).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from memrepo import tokens
from memrepo.retrieval.plan import Plan, Pointer
from memrepo.workspace import PathOutsideRepo, Workspace

log = logging.getLogger(__name__)

#: Runs a git pointer (``git_diff``/``git_log``) and returns its output text.
GitRunner = Callable[[Workspace, Pointer], str]

MIN_USEFUL_TOKENS = 24


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


def _default_git(ws: Workspace, pointer: Pointer) -> str:
    from memrepo.gitcli import git_text

    ws.resolve(pointer.path)
    if pointer.kind == "git_diff":
        args = [
            "diff",
            "--no-ext-diff",
            "--no-textconv",
            "--no-color",
            str(pointer.rev),
            "--",
            pointer.path,
        ]
    else:
        args = ["log", "--no-color", "--stat", f"-{pointer.count or 5}", "--", pointer.path]
    return git_text(args, ws.path)


def _read(ws: Workspace, pointer: Pointer, git_runner: GitRunner) -> str | None:
    if pointer.kind in ("git_diff", "git_log"):
        return git_runner(ws, pointer)
    text = ws.read(pointer.path)
    if text is None:
        return None
    if pointer.kind == "file_section":
        lines = text.splitlines(keepends=True)
        text = "".join(lines[(pointer.start_line or 1) - 1 : pointer.end_line])
    return text


def render_block(source: str, reason: str, text: str) -> str:
    """Return the context rendering of one block."""
    return f"### {source} — {reason}\n{text.rstrip()}\n"


def resolve(
    ws: Workspace, plan: Plan, max_tokens: int, *, git_runner: GitRunner = _default_git
) -> Resolved:
    """Turn ``plan`` into a context of at most ``max_tokens`` tokens (``cl100k_base``).

    Pointers whose file is missing or outside the repository are skipped (and counted in
    ``skipped``), never fatal: a plan is advice, the budget is law.
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
    for pointer in [*must, *optional]:
        if pointer.source in seen:
            continue
        seen.add(pointer.source)
        room = max_tokens - used
        if room < MIN_USEFUL_TOKENS:
            skipped += 1
            continue
        try:
            text = _read(ws, pointer, git_runner)
        except (PathOutsideRepo, OSError, UnicodeDecodeError) as exc:
            log.info("pointer skipped", extra={"source": pointer.source, "error": str(exc)})
            skipped += 1
            continue
        if not text or not text.strip():
            skipped += 1
            continue
        block_text = render_block(pointer.source, pointer.reason, text)
        cost = tokens.count(block_text)
        cut = False
        if cost > room:
            block_text, cut = tokens.truncate_lines(block_text, room - 8)
            if block_text.count("\n") < 2:
                skipped += 1
                continue
            block_text += "[… cut to fit the token budget]\n"
            cost = tokens.count(block_text)
        rendered.append(block_text)
        used += cost
        blocks.append(Block(pointer.source, pointer.kind, cost, pointer.reason, block_text, cut))
    text = "\n".join(rendered)
    total = tokens.count(text)
    while total > max_tokens and blocks:  # joins can merge tokens differently; stay under budget
        blocks.pop()
        rendered.pop()
        text = "\n".join(rendered)
        total = tokens.count(text)
    return Resolved(text=text, blocks=tuple(blocks), tokens_used=total, skipped=skipped)
