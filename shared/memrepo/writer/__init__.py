"""Writers: the engine port, the deterministic and LLM engines, the fallback, and the service.

Names are imported on first access (PEP 562), so the deterministic path of a cold writer never
loads the LLM engine's modules.
"""

from typing import TYPE_CHECKING as _TYPE_CHECKING

from memrepo._lazy import lazy_attributes as _lazy_attributes

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


__getattr__, __dir__ = _lazy_attributes(__name__, _LAZY, globals())


__all__ = [
    "CommitPlan",
    "DeterministicWriter",
    "FallbackWriter",
    "LLMWriter",
    "SessionWriter",
    "WriteResult",
    "WriterEngine",
]
