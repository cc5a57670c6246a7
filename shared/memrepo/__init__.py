"""memrepo: long-term memory for conversational AI, kept as a git repository per user.

Public API: :func:`open` returns a :class:`Memory` with ``write_session``, ``context``,
``process_and_commit_session`` and ``get_context``. Errors derive from :class:`MemrepoError`.
"""

from memrepo.api import Memory, open
from memrepo.errors import MemrepoError, PermanentError, TransientError
from memrepo.events import SessionEnded, Turn
from memrepo.retrieval.service import ContextResult
from memrepo.settings import Settings
from memrepo.writer.service import WriteResult

__all__ = [
    "ContextResult",
    "Memory",
    "MemrepoError",
    "PermanentError",
    "SessionEnded",
    "Settings",
    "TransientError",
    "Turn",
    "WriteResult",
    "open",
]
__version__ = "0.1.0"
