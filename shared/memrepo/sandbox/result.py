"""What a call of the ``run`` tool returns, and the error a refused command raises."""

from __future__ import annotations

from dataclasses import dataclass

from memrepo.errors import PermanentError

#: Exit code reported for a refused command (nothing was executed).
REFUSED_EXIT_CODE = 126
#: Exit code reported when the wall-clock limit stopped the command (as ``timeout(1)`` does).
TIMEOUT_EXIT_CODE = 124


class SandboxRefusal(PermanentError):
    """Raised when a command string fails parsing or the allowlist; nothing was executed.

    Attributes:
        reason: one short sentence the model can act on, for example
            "`touch` is not allowed; allowed programs: cat, cut, ...".
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class RunResult:
    """The outcome of one ``run(command)`` call, as the model sees it.

    Attributes:
        command: the command string as received.
        output: standard output of the chain, each pipeline's standard error appended after its
            standard output, then a note when the output was truncated or the time ran out; for
            a refused command, ``"refused: <reason>"``.
        refused: the command was refused by the parser or the allowlist and nothing ran.
        reason: the refusal reason (``None`` unless ``refused``).
        truncated: the output reached the byte cap; the command was stopped there.
        timed_out: the wall-clock limit was reached; the command was stopped there.
        exit_code: the status of the last pipeline that ran (its last stage, 128 + N when killed
            by signal N), ``126`` when refused, ``124`` on timeout.
        elapsed_s: wall-clock time of the call in seconds.
    """

    command: str
    output: str
    refused: bool
    reason: str | None
    truncated: bool
    timed_out: bool
    exit_code: int
    elapsed_s: float
