"""Writers: the engine port, the deterministic engine, and the session-writing service."""

from memrepo.writer.base import CommitPlan, WriterEngine
from memrepo.writer.deterministic import DeterministicWriter
from memrepo.writer.service import SessionWriter, WriteResult

__all__ = ["CommitPlan", "DeterministicWriter", "SessionWriter", "WriteResult", "WriterEngine"]
