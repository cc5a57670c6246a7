"""Writers: the engine port, the deterministic and LLM engines, the fallback, and the service.

Names are imported on first access (PEP 562), so the deterministic path of a cold writer never
loads the LLM engine's modules.
"""

import importlib as _importlib
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

_LAZY = {
    "CommitPlan": "memrepo.writer.base",
    "DeterministicWriter": "memrepo.writer.deterministic",
    "FallbackWriter": "memrepo.writer.fallback",
    "LLMWriter": "memrepo.writer.llm",
    "SessionWriter": "memrepo.writer.service",
    "WriteResult": "memrepo.writer.service",
    "WriterEngine": "memrepo.writer.base",
}

if _TYPE_CHECKING:
    from memrepo.writer.base import CommitPlan, WriterEngine
    from memrepo.writer.deterministic import DeterministicWriter
    from memrepo.writer.fallback import FallbackWriter
    from memrepo.writer.llm import LLMWriter
    from memrepo.writer.service import SessionWriter, WriteResult


def __getattr__(name: str) -> _Any:
    """Import a public name on first access (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memrepo.writer' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "CommitPlan",
    "DeterministicWriter",
    "FallbackWriter",
    "LLMWriter",
    "SessionWriter",
    "WriteResult",
    "WriterEngine",
]
