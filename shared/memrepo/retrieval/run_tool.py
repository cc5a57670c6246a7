"""The retrieval agent's one tool, ``run(command)``: sandbox, deadline, what the model sees.

Every command string goes through :class:`memrepo.sandbox.Sandbox` (parsed like sh(1), decided
by an allowlist, run as argv lists without a shell, bounded in time and output). This module adds
what the agent loop needs around it:

* a deadline: a command starts only if some time is left, and its wall-clock limit is
  ``min(timeout_s, time left)``;
* the rendering of a result as the ``tool`` message the model reads, with the output framed as
  *data* between markers that carry a per-run random nonce (memory files hold text users wrote;
  the nonce keeps that text from closing the frame and posing as instructions).

``memrepo run USER COMMAND`` prints exactly :meth:`RunTool.run`'s text, so operators see what
the agent saw.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memrepo.sandbox import RunResult, Sandbox
from memrepo.sandbox.gitprograms import GIT_SUBCOMMANDS
from memrepo.sandbox.programs import ALLOWED_PROGRAMS

#: Wall-clock limit of one command string, in seconds (lowered to the time left).
COMMAND_TIMEOUT_S = 3.0
#: Output kept from one command string, in bytes (about 3,000 tokens).
MAX_OUTPUT_BYTES = 12_000
#: A command is not started with less time than this left before the deadline, in seconds.
MIN_COMMAND_S = 0.05

RUN_TOOL_NAME = "run"


def run_tool_spec() -> dict[str, Any]:
    """Return the OpenAI function-tool definition of ``run(command)``.

    Returns:
        ``{"type": "function", "function": {"name": "run", "description", "parameters"}}``,
        the description naming the programs and git subcommands the sandbox allows.
    """
    programs = ", ".join(p for p in ALLOWED_PROGRAMS if p != "git")
    subcommands = ", ".join(sorted(GIT_SUBCOMMANDS))
    return {
        "type": "function",
        "function": {
            "name": RUN_TOOL_NAME,
            "description": (
                "Run read-only commands in the user's memory repository (the working directory "
                "is its root) and get their output. Chain several commands with `;`, `&&`, `||` "
                f"and pipe with `|`. Programs: {programs}; git {subcommands}. No redirection, "
                "no $(...), no writing; paths relative to the repository root. A refused command "
                "runs nothing and says why."
            ),
            "parameters": {
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": (
                            'e.g. grep -n "knee\\|surgery" memories/people/*.md; '
                            "git diff HEAD~3.. -- timeline/2024-04.md"
                        ),
                    }
                },
                "required": ["command"],
                "additionalProperties": False,
            },
        },
    }


def new_nonce() -> str:
    """Return a fresh random marker suffix (12 hex digits) for one agent run."""
    return secrets.token_hex(6)


def frame(text: str, nonce: str) -> str:
    """Return ``text`` between data markers: ``<<<DATA-{nonce}`` and ``DATA-{nonce}>>>``.

    Args:
        text: untrusted text (command output, stored memory, the conversation).
        nonce: the run's marker suffix, see :func:`new_nonce`.
    """
    body = text if text.endswith("\n") or not text else text + "\n"
    return f"<<<DATA-{nonce}\n{body}DATA-{nonce}>>>"


def render(result: RunResult, nonce: str) -> str:
    """Return the ``tool`` message content the model reads for one command.

    The first line is ours (``exit N``, ``refused: nothing ran``, ``timed out``), the rest is the
    output, framed as data (see :func:`frame`).

    Args:
        result: what the sandbox returned.
        nonce: the run's marker suffix.
    """
    if result.refused:
        status = "refused: nothing ran (exit 126); fix the command or drop it"
    elif result.timed_out:
        status = f"timed out and stopped (exit {result.exit_code}); narrow the command"
    else:
        status = f"exit {result.exit_code}" + (", output truncated" if result.truncated else "")
    return f"{status}\n{frame(result.output, nonce)}"


@dataclass(frozen=True)
class ToolRun:
    """One command the tool ran (or refused): the sandbox result and the text the model read."""

    result: RunResult
    text: str


class RunTool:
    """``run(command)`` on one hydrated repository, bounded by a deadline.

    Args:
        repo_root: the working tree of the user's hydrated repository (never written).
        timeout_s: wall-clock limit of one command string, in seconds.
        max_output_bytes: output kept from one command string, in bytes.
        nonce: the data-marker suffix; a fresh one by default.
    """

    def __init__(
        self,
        repo_root: Path,
        *,
        timeout_s: float = COMMAND_TIMEOUT_S,
        max_output_bytes: int = MAX_OUTPUT_BYTES,
        nonce: str | None = None,
    ) -> None:
        self.repo_root = repo_root
        self.timeout_s = timeout_s
        self.max_output_bytes = max_output_bytes
        self.nonce = nonce or new_nonce()

    def time_left(self, deadline: float | None) -> float:
        """Return the seconds a command may run: ``timeout_s``, lowered to the time left."""
        if deadline is None:
            return self.timeout_s
        return min(self.timeout_s, deadline - time.monotonic())

    def run(self, command: str, *, deadline: float | None = None) -> ToolRun:
        """Run ``command`` through the sandbox and render what the model reads.

        Args:
            command: the command string as the model sent it.
            deadline: a ``time.monotonic()`` instant the command may not run past, or ``None``.

        Returns:
            The sandbox result (a refusal is a result, not an error) and its rendering.

        Raises:
            TimeoutError: less than :data:`MIN_COMMAND_S` is left before ``deadline``; nothing ran.
        """
        limit = self.time_left(deadline)
        if limit < MIN_COMMAND_S:
            raise TimeoutError(f"{max(limit, 0) * 1000:.0f} ms left: no time for another command")
        sandbox = Sandbox(self.repo_root, timeout_s=limit, max_output_bytes=self.max_output_bytes)
        result = sandbox.run(command)
        return ToolRun(result, render(result, self.nonce))
