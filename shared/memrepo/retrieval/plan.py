"""The retrieval plan: pointers into the user's repository, not content.

An engine (the deterministic one, or the LLM agent) answers with a :class:`Plan`; the resolver
(:mod:`memrepo.retrieval.resolver`) turns it into text under a token budget. Pointer kinds:

* ``file``: a whole file (``path``);
* ``file_section``: lines ``start_line``..``end_line`` (1-based, inclusive) of ``path``;
* ``git_diff``: ``git diff <rev> -- <path>`` (``rev`` like ``HEAD~3..`` or ``abc123..HEAD``);
* ``git_log``: ``git log --stat -<n> -- <path>`` (``n`` = ``count``, at most 20).

Paths are relative to the repository root and are checked again when resolved; ``rev`` must match
:data:`REV_PATTERN` so no option or command can be smuggled through it.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

REV_PATTERN = re.compile(
    r"(HEAD(~\d{1,4})?|[0-9a-f]{7,40})(\.\.(HEAD(~\d{1,4})?|[0-9a-f]{7,40})?)?"
)
_PATH = re.compile(r"[^\x00-\x1f]{1,300}")

PointerKind = Literal["file", "file_section", "git_diff", "git_log"]


class Pointer(BaseModel):
    """One place in the repository worth reading, with why and how much it matters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: PointerKind
    path: str
    reason: str = Field(max_length=300)
    priority: Literal["must", "optional"] = "optional"
    est_tokens: int = Field(default=0, ge=0)
    score: float = 0.0
    start_line: int | None = Field(default=None, ge=1)
    end_line: int | None = Field(default=None, ge=1)
    rev: str | None = None
    count: int | None = Field(default=None, ge=1, le=20)

    @field_validator("path")
    @classmethod
    def _relative(cls, value: str) -> str:
        if not _PATH.fullmatch(value) or value.startswith(("/", "-")) or ".." in value.split("/"):
            raise ValueError("path must be relative to the repository, without '..'")
        return value

    @field_validator("rev")
    @classmethod
    def _rev(cls, value: str | None) -> str | None:
        if value is not None and not REV_PATTERN.fullmatch(value):
            raise ValueError("rev must look like HEAD~3.., abc1234..HEAD or a commit id")
        return value

    @model_validator(mode="after")
    def _fields_for_kind(self) -> Pointer:
        if self.kind == "file_section":
            if self.start_line is None or self.end_line is None or self.end_line < self.start_line:
                raise ValueError("file_section needs start_line <= end_line")
        if self.kind == "git_diff" and self.rev is None:
            raise ValueError("git_diff needs rev")
        return self

    @property
    def source(self) -> str:
        """A short label: ``path``, ``path#L3-L9``, ``git diff REV -- path``, ``git log ...``."""
        if self.kind == "file_section":
            return f"{self.path}#L{self.start_line}-L{self.end_line}"
        if self.kind == "git_diff":
            return f"git diff {self.rev} -- {self.path}"
        if self.kind == "git_log":
            return f"git log --stat -{self.count or 5} -- {self.path}"
        return self.path


class Plan(BaseModel):
    """A retrieval plan: pointers, must-pointers first when resolved."""

    model_config = ConfigDict(extra="forbid")

    pointers: list[Pointer] = Field(default_factory=list, max_length=200)
    notes: str = Field(default="", max_length=2000)
