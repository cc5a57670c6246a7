"""The one exception tree of memrepo.

Every error the library raises derives from :class:`MemrepoError`. Each class says whether it is
*permanent* (retrying the same input can never succeed: the writer acknowledges or dead-letters
the message) or *transient* (a retry may succeed: the writer raises so Pub/Sub redelivers).
Adapters translate third-party errors (``google.api_core``, ``openai``, ``OSError``) into this tree
with ``raise ... from exc``.

| class                     | permanent | typical cause                                           |
|---------------------------|-----------|---------------------------------------------------------|
| ``InvalidEvent``          | yes       | not base64/JSON, missing or bad field, bad id           |
| ``EventTooLarge``         | yes       | transcript over ``max_transcript_bytes``                |
| ``SessionConflict``       | yes       | a session id reused with another transcript             |
| ``InvalidRequest``        | yes       | a context request that fails validation                 |
| ``Unauthorized``          | yes       | a missing or wrong bearer token                         |
| ``CorruptBundle``         | yes       | a stored bundle that git cannot verify                  |
| ``StoreUnavailable``      | no        | Cloud Storage 5xx/429, timeouts, I/O errors             |
| ``PreconditionFailed``    | no        | a generation precondition lost to a concurrent writer   |
| ``ConflictRetriesExhausted`` | no     | the bound on re-apply after preconditions was reached   |
| ``GitError``              | no        | a git command failed unexpectedly                       |
| ``LLMUnavailable``        | no        | the LLM endpoint failed after its retries               |
"""

from __future__ import annotations


class MemrepoError(Exception):
    """Root of every error memrepo raises. ``permanent`` says whether a retry can help."""

    permanent: bool = False


class PermanentError(MemrepoError):
    """Raised when retrying the same input can never succeed (acknowledge, do not redeliver)."""

    permanent = True


class TransientError(MemrepoError):
    """Raised when a retry of the same input may succeed (raise so Pub/Sub redelivers)."""

    permanent = False


class InvalidEvent(PermanentError):
    """Raised when a session-end event cannot be decoded or fails validation."""


class EventTooLarge(InvalidEvent):
    """Raised when a session's transcript exceeds the configured byte limit."""


class SessionConflict(PermanentError):
    """Raised when a session id already committed arrives again with a different transcript."""


class InvalidRequest(PermanentError):
    """Raised when a context request (HTTP body or API call) fails validation."""


class Unauthorized(PermanentError):
    """Raised when the retrieval function requires a bearer token and none or a wrong one came."""


class CorruptBundle(PermanentError):
    """Raised when a stored bundle cannot be verified or unbundled by git."""


class StoreUnavailable(TransientError):
    """Raised when the bundle store fails for a reason a retry may fix (5xx, 429, timeout, I/O)."""


class PreconditionFailed(TransientError):
    """Raised when a write's generation precondition does not hold (another writer was first)."""


class ConflictRetriesExhausted(TransientError):
    """Raised when a session could not be applied within the bound of precondition retries."""


class GitError(TransientError):
    """Raised when a git command exits non-zero where success was expected."""


class LLMUnavailable(TransientError):
    """Raised when the LLM endpoint keeps failing after its bounded retries."""
