"""Answering a context request: hydrate read-only, plan, resolve under the budget.

The planning engine is the LLM agent when one is configured, else the deterministic engine. When
the agent fails, runs out of time or returns an invalid plan, the deterministic plan stands in and
the result says so (``engine="deterministic"``, ``fallback_reason``), DESIGN.md invariant 5.
Retrieval never uploads: the workspace is a private copy, removed afterwards. A user without
memory (no manifest, no legacy bundle) gets the empty context without any workspace being made.

Time: the request's deadline bounds everything. The agent gets the deadline minus
``fallback_reserve_s`` (the deterministic plan plus the resolver: ~0.1-0.35 s on a LoCoMo-sized
memory), so a failed or slow agent still leaves time for the fallback; with less than that left
after hydration the agent is not started. ``fallback_reason`` starts with a code: the agent's
(``deadline``, ``llm_unavailable``, ``llm_rejected``, ``bad_plan``, ``llm_budget``,
``turn_limit``, see :mod:`memrepo.retrieval.agent`) or the exception's class name.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from memrepo.errors import InvalidEvent, InvalidRequest
from memrepo.ids import validate_user_id

# The engine (plan models, deterministic planner, resolver, tokenizer) is imported by the first
# request that has memory to read: a user without memory needs none of it.
if TYPE_CHECKING:
    from memrepo.repos import UserRepos
    from memrepo.retrieval.plan import Plan
    from memrepo.retrieval.resolver import Block
    from memrepo.workspace import Workspace

log = logging.getLogger(__name__)

#: Seconds before the deadline at which the agent must have finished (see the module docstring).
FALLBACK_RESERVE_S = 0.4


class PlanningAgent(Protocol):
    """Port: an engine that explores a workspace and returns a :class:`Plan` before a deadline."""

    name: str

    def plan(
        self,
        ws: Workspace,
        conversation: Sequence[dict[str, str]],
        max_tokens: int,
        deadline: float,
    ) -> tuple[Plan, dict[str, Any]]:
        """Return ``(plan, metadata)``; ``deadline`` is a ``time.monotonic()`` instant.

        Raises:
            Exception: any failure; the caller falls back to the deterministic plan.
        """
        ...


@dataclass(frozen=True)
class ContextResult:
    """A context for the bot: text, the blocks it is made of, and how it was made."""

    text: str
    blocks: tuple[Block, ...]
    tokens_used: int
    engine: str
    elapsed_ms: float
    fallback_reason: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the HTTP response body: ``{context, blocks, tokens_used, engine, ...}``."""
        body: dict[str, Any] = {
            "context": self.text,
            "blocks": [
                {
                    "source": b.source,
                    "kind": b.kind,
                    "tokens": b.tokens,
                    "reason": b.reason,
                    "cut": b.cut,
                }
                for b in self.blocks
            ],
            "tokens_used": self.tokens_used,
            "engine": self.engine,
            "elapsed_ms": round(self.elapsed_ms, 1),
            "metadata": self.metadata,
        }
        if self.fallback_reason:
            body["fallback_reason"] = self.fallback_reason
        return body


class Retriever:
    """Builds contexts for one store (see the module docstring)."""

    def __init__(
        self,
        repos: UserRepos,
        *,
        agent: PlanningAgent | None = None,
        max_tokens_limit: int = 32_000,
        deadline_s: float = 8.0,
        fallback_reserve_s: float = FALLBACK_RESERVE_S,
    ) -> None:
        """Args:
        repos: the user repositories (only read).
        agent: the LLM planning agent, or ``None`` for the deterministic engine only.
        max_tokens_limit: the largest budget a request may ask for, in tokens.
        deadline_s: the default time budget of a request, in seconds.
        fallback_reserve_s: seconds kept from the agent for the fallback plan and the resolver.
        """
        self.fallback_reserve_s = fallback_reserve_s
        self.repos = repos
        self.agent = agent
        self.max_tokens_limit = max_tokens_limit
        self.deadline_s = deadline_s

    def check_budget(self, max_tokens: object) -> int:
        """Return ``max_tokens`` if it is an integer in ``1..max_tokens_limit``.

        Raises:
            InvalidRequest: otherwise (0, negative, too large, not an integer).
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise InvalidRequest("max_tokens must be an integer")
        if not 1 <= max_tokens <= self.max_tokens_limit:
            raise InvalidRequest(
                f"max_tokens must be between 1 and {self.max_tokens_limit}, got {max_tokens}"
            )
        return max_tokens

    def context(
        self,
        user_id: str,
        conversation: Sequence[dict[str, str]],
        max_tokens: int,
        *,
        deadline_s: float | None = None,
    ) -> ContextResult:
        """Return the context for ``conversation`` from ``user_id``'s memory.

        A user with no memory gets an empty, valid context.

        Raises:
            InvalidRequest: bad budget or user id. StoreUnavailable, CorruptBundle: store errors.
        """
        started = time.monotonic()
        deadline = started + (deadline_s if deadline_s is not None else self.deadline_s)
        max_tokens = self.check_budget(max_tokens)
        try:
            validate_user_id(user_id)
        except InvalidEvent as exc:
            raise InvalidRequest(str(exc)) from exc
        found = self.repos.checkout_existing(user_id, read_only=True)
        if found is None:
            return _without_memory(started)
        from memrepo import tokens
        from memrepo.retrieval import deterministic
        from memrepo.retrieval.resolver import resolve

        ws, _ = found
        with ws:
            if ws.head() is not None:
                # loaded once per process (~0.4 s, ~60 MB), never inside the fallback's reserve
                tokens.encoding()
            timings: dict[str, float] = {"hydrate_ms": (time.monotonic() - started) * 1000}
            engine = "deterministic"
            reason: str | None = None
            meta: dict[str, Any] = {}
            plan: Plan | None = None
            if self.agent is not None and ws.head() is not None:
                t0 = time.monotonic()
                agent_deadline = deadline - self.fallback_reserve_s
                try:
                    if agent_deadline <= t0:
                        raise TimeoutError(
                            f"{(deadline - t0) * 1000:.0f} ms left after hydration, "
                            f"{self.fallback_reserve_s * 1000:.0f} ms kept for the fallback"
                        )
                    plan, meta = self.agent.plan(ws, conversation, max_tokens, agent_deadline)
                    engine = self.agent.name
                except Exception as exc:  # noqa: BLE001 - any agent failure falls back (invariant 5)
                    reason = _fallback_reason(exc)
                    meta = dict(getattr(exc, "metadata", None) or {})
                    log.warning(
                        "retrieval agent failed; deterministic plan used", extra={"reason": reason}
                    )
                timings["agent_ms"] = (time.monotonic() - t0) * 1000
            t0 = time.monotonic()
            if plan is None:
                plan = deterministic.plan(ws, conversation, max_tokens)
            timings["plan_ms"] = (time.monotonic() - t0) * 1000
            t0 = time.monotonic()
            resolved = resolve(ws, plan, max_tokens, deadline=deadline)
            timings["resolve_ms"] = (time.monotonic() - t0) * 1000
        timings = {**meta.get("timings_ms", {}), **timings}
        meta = {
            **{k: v for k, v in meta.items() if k != "timings_ms"},
            "timings_ms": {k: round(v, 1) for k, v in timings.items()},
            "pointers": len(plan.pointers),
            "skipped": resolved.skipped,
        }
        return ContextResult(
            text=resolved.text,
            blocks=resolved.blocks,
            tokens_used=resolved.tokens_used,
            engine=engine,
            elapsed_ms=(time.monotonic() - started) * 1000,
            fallback_reason=reason,
            metadata=meta,
        )


def _without_memory(started: float) -> ContextResult:
    """Return the context of a user without memory: the one the deterministic plan and the
    resolver give an empty repository (no pointers, nothing skipped), without making one (no
    workspace, no git, no engine or tokenizer loaded)."""
    hydrate_ms = (time.monotonic() - started) * 1000
    return ContextResult(
        text="",
        blocks=(),
        tokens_used=0,
        engine="deterministic",
        elapsed_ms=hydrate_ms,
        metadata={
            "timings_ms": {"hydrate_ms": round(hydrate_ms, 1), "plan_ms": 0.0, "resolve_ms": 0.0},
            "pointers": 0,
            "skipped": 0,
        },
    )


def _fallback_reason(exc: BaseException) -> str:
    """Return ``"<code>: <detail>"`` (at most 300 characters) for an agent failure.

    The code is the exception's ``code`` attribute (:class:`memrepo.retrieval.agent.AgentFailed`),
    ``deadline`` for a :class:`TimeoutError`, else its class name; a message that already starts
    with its code is kept as is.
    """
    code = getattr(exc, "code", None) or (
        "deadline" if isinstance(exc, TimeoutError) else type(exc).__name__
    )
    text = str(exc)
    return (text if text.startswith(f"{code}: ") else f"{code}: {text}")[:300]
