"""The ``run`` tool of the retrieval agent: read-only commands in one user's repository."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from memrepo.sandbox.executor import Executor
from memrepo.sandbox.lexer import parse
from memrepo.sandbox.policy import PlannedPipeline, Policy
from memrepo.sandbox.result import (
    REFUSED_EXIT_CODE,
    RunResult,
    SandboxRefusal,
)

logger = logging.getLogger(__name__)

#: The longest command string accepted, in characters.
MAX_COMMAND_CHARS = 10_000


class Sandbox:
    """Runs the model's command strings read-only inside one repository, within limits.

    A command string is parsed like sh(1) would (words, quotes, ``|``, ``;``, ``&&``, ``||``,
    newlines), checked against an allowlist of programs, options and paths, and only then run as
    argv lists without a shell. See :mod:`memrepo.sandbox.lexer`,
    :mod:`memrepo.sandbox.programs`, :mod:`memrepo.sandbox.gitprograms` and
    :mod:`memrepo.sandbox.executor`.

    Args:
        repo_root: the working tree of the user's repository (hydrated, read-only use).
        timeout_s: wall-clock limit for one command string, in seconds.
        max_output_bytes: cap on the output kept from one command string, in bytes.
        executor: runs accepted plans; a subclass can observe every program started.

    Raises:
        ValueError: ``timeout_s`` or ``max_output_bytes`` is not positive, or ``repo_root`` is
            not a directory.
    """

    def __init__(
        self,
        repo_root: Path,
        *,
        timeout_s: float = 5.0,
        max_output_bytes: int = 32_000,
        executor: Executor | None = None,
    ) -> None:
        if timeout_s <= 0 or max_output_bytes <= 0:
            raise ValueError("timeout_s and max_output_bytes must be positive")
        if not os.path.isdir(repo_root):
            raise ValueError(f"not a directory: {repo_root}")
        self.repo_root = Path(os.path.realpath(repo_root))
        self.timeout_s = timeout_s
        self.max_output_bytes = max_output_bytes
        self._policy = Policy(self.repo_root)
        self._executor = executor if executor is not None else Executor()

    def check(self, command: str) -> None:
        """Parse and check a command string without running anything.

        Args:
            command: the command string as the model sent it.

        Raises:
            SandboxRefusal: the command would be refused; ``reason`` says why.
        """
        self._plan(command)

    def run(self, command: str) -> RunResult:
        """Run a command string and return what the model should see.

        A refused command runs nothing and comes back with ``refused=True`` and its reason in
        ``output``; it is not raised. When this returns, every process it started has ended.

        Args:
            command: the command string as the model sent it.

        Returns:
            The output (capped at ``max_output_bytes``, with a note when truncated or timed out)
            and how the command ended.
        """
        start = time.monotonic()
        try:
            plan = self._plan(command)
        except SandboxRefusal as exc:
            logger.info("run refused: %s", exc.reason)
            return RunResult(
                command=command,
                output=f"refused: {exc.reason}",
                refused=True,
                reason=exc.reason,
                truncated=False,
                timed_out=False,
                exit_code=REFUSED_EXIT_CODE,
                elapsed_s=time.monotonic() - start,
            )
        outcome = self._executor.run(
            plan,
            cwd=self.repo_root,
            timeout_s=self.timeout_s,
            max_output_bytes=self.max_output_bytes,
        )
        output = outcome.output.decode("utf-8", "replace")
        if outcome.truncated:
            output += f"\n[output truncated at {self.max_output_bytes} bytes]\n"
        if outcome.timed_out:
            logger.warning("run timed out after %.1f s: %.200s", self.timeout_s, command)
            output += (
                f"\n[timed out after {self.timeout_s:g} s: the command was stopped; "
                "narrow it (a path, -m N, head) and try again]\n"
            )
        return RunResult(
            command=command,
            output=output,
            refused=False,
            reason=None,
            truncated=outcome.truncated,
            timed_out=outcome.timed_out,
            exit_code=outcome.exit_code,
            elapsed_s=time.monotonic() - start,
        )

    def _plan(self, command: str) -> tuple[PlannedPipeline, ...]:
        if len(command) > MAX_COMMAND_CHARS:
            raise SandboxRefusal(f"the command is longer than {MAX_COMMAND_CHARS} characters")
        return self._policy.plan(parse(command))
