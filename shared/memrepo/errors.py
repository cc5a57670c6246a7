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
| ``SearchFailed``          | no        | the deterministic engine's grep over a checkout failed  |
| ``LLMError``              | no        | base of the LLM errors below (the input is not at fault) |
| ``LLMUnavailable``        | no        | the LLM endpoint failed after its retries               |
| ``LLMRejected``           | no        | the endpoint refused the request (4xx: key, model, size) |
| ``LLMBadOutput``          | no        | the answer stayed invalid after bounded repair rounds   |
| ``LLMBudgetExceeded``     | no        | a per-session cap on LLM calls, tokens or time was hit  |
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


class SearchFailed(TransientError):
    """Raised when the line search of the deterministic retrieval engine (grep) fails."""


class LLMError(TransientError):
    """Base of the LLM errors: the session or request is fine, so a retry or a fallback engine can
    handle it (the writer falls back to the deterministic engine, retrieval to its plan)."""


class LLMUnavailable(LLMError):
    """Raised when the LLM endpoint keeps failing (connection, timeout, 429, 5xx) after its
    bounded retries, or the deadline passes first."""


class LLMRejected(LLMError):
    """Raised when the endpoint refuses a request with a 4xx other than 408/409/429 (wrong key,
    unknown model, context too long); the client does not retry it."""


class LLMBadOutput(LLMError):
    """Raised when a model's answer stays invalid (not JSON, fails its schema, cut at
    ``max_tokens``, refused) after the bounded repair rounds."""


class LLMBudgetExceeded(LLMError):
    """Raised before a call that would exceed a per-session cap on LLM calls or tokens."""
