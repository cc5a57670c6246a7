"""The writer engine port: turn one session into the files of one commit."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from memrepo.events import SessionEnded
from memrepo.workspace import Workspace


@dataclass(frozen=True)
class CommitPlan:
    """What one session changes: whole-file texts by repository path, and the commit subject."""

    files: dict[str, str]
    message: str
    writer: str
    extra_trailers: dict[str, str] = field(default_factory=dict)


class WriterEngine(ABC):
    """Port: an engine (deterministic or LLM) that prepares a session's commit.

    ``prepare`` reads the workspace and returns a :class:`CommitPlan`; it never writes to the
    workspace itself, so a failure leaves nothing behind.
    """

    name: str = "engine"

    @abstractmethod
    def prepare(self, ws: Workspace, event: SessionEnded) -> CommitPlan:
        """Return the commit plan of ``event`` on top of the workspace's current state."""
