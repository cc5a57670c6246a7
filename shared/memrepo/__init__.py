"""memrepo: long-term memory for conversational AI, kept as a git repository per user.

Public API: :func:`open` returns a :class:`Memory` with ``write_session``, ``context``,
``process_and_commit_session`` and ``get_context``. Errors derive from :class:`MemrepoError`.

The public names are loaded on first access (PEP 562 module ``__getattr__``), so importing one
submodule (``from memrepo import handlers``, as the functions' ``main.py`` do) does not import the
whole library: each function's cold start loads only its own path.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from memrepo._lazy import lazy_attributes as _lazy_attributes
from memrepo.errors import MemrepoError, PermanentError, TransientError

_LAZY = {
    "ContextResult": "memrepo.retrieval.service",
    "Memory": "memrepo.api",
    "SessionEnded": "memrepo.events",
    "Settings": "memrepo.settings",
    "Turn": "memrepo.events",
    "WriteResult": "memrepo.writer.service",
    "open": "memrepo.api",
}

if _TYPE_CHECKING:
    from memrepo.api import Memory, open
    from memrepo.events import SessionEnded, Turn
    from memrepo.retrieval.service import ContextResult
    from memrepo.settings import Settings
    from memrepo.writer.service import WriteResult


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())


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
