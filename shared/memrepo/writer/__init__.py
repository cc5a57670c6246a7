"""Writers: the engine port, the deterministic and LLM engines, the fallback, and the service."""

from memrepo.writer.base import CommitPlan, WriterEngine
from memrepo.writer.deterministic import DeterministicWriter
from memrepo.writer.fallback import FallbackWriter
from memrepo.writer.llm import LLMWriter
from memrepo.writer.service import SessionWriter, WriteResult

__all__ = [
    "CommitPlan",
    "DeterministicWriter",
    "FallbackWriter",
    "LLMWriter",
    "SessionWriter",
    "WriteResult",
    "WriterEngine",
]
