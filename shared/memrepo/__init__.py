"""memrepo: long-term memory for conversational AI, kept as a git repository per user.

Public API: :func:`open` returns a :class:`Memory` with ``write_session``, ``context``,
``process_and_commit_session`` and ``get_context``. Errors derive from :class:`MemrepoError`.

The public names are loaded on first access (PEP 562 module ``__getattr__``), so importing one
submodule (``from memrepo import handlers``, as the functions' ``main.py`` do) does not import the
whole library: each function's cold start loads only its own path.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

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


def __getattr__(name: str) -> _Any:
    """Import a public name on first access (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memrepo' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


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
