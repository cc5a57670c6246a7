"""A writer engine that falls back to another when the first fails: failure is not loss.

``FallbackWriter(LLMWriter(...), DeterministicWriter())`` commits every session: when the LLM
engine raises (endpoint down, answers invalid, budget spent, or a bug), the deterministic plan is
used and the commit says so in its trailers::

    Writer: deterministic (llm failed: LLMUnavailable)
    Fallback-Reason: LLM m: HTTP 500 after retries: ...

so the session can be found (``git log --grep "llm failed"``) and re-processed later. Engines
never write to the workspace in ``prepare``, so the fallback starts from the same clean state.
"""

from __future__ import annotations

import dataclasses
import logging
import re

from memrepo.errors import MemrepoError
from memrepo.events import SessionEnded
from memrepo.workspace import Workspace
from memrepo.writer.base import CommitPlan, WriterEngine

log = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[\x00-\x1f\x7f]+")


class FallbackWriter(WriterEngine):
    """Prepare with ``primary``; on any exception, with ``fallback``, marking the commit."""

    def __init__(self, primary: WriterEngine, fallback: WriterEngine) -> None:
        """Args:
        primary: the preferred engine (the LLM writer).
        fallback: the engine that must not fail for reasons of its own (deterministic).
        """
        self.primary = primary
        self.fallback = fallback
        self.name = primary.name

    def prepare(self, ws: Workspace, event: SessionEnded) -> CommitPlan:
        """Return ``primary``'s plan, or ``fallback``'s marked with why the primary failed.

        Raises:
            Whatever ``fallback`` raises (for example ``GitError``): nothing is written then.
        """
        try:
            return self.primary.prepare(ws, event)
        except Exception as exc:  # noqa: BLE001 - any primary failure falls back (failure is not loss)
            reason = type(exc).__name__
            detail = _UNSAFE.sub(" ", str(exc)).strip()[:200] or reason
            extra = {"user_id": event.user_id, "session_id": event.session_id, "error": reason}
            if isinstance(exc, MemrepoError):
                log.warning(
                    "%s writer failed; falling back: %s", self.primary.name, detail, extra=extra
                )
            else:
                log.exception("%s writer crashed; falling back", self.primary.name, extra=extra)
        plan = self.fallback.prepare(ws, event)
        return dataclasses.replace(
            plan,
            writer=f"{plan.writer} ({self.primary.name} failed: {reason})",
            extra_trailers={**plan.extra_trailers, "Fallback-Reason": detail},
        )
