"""The composition root: build the real adapters and services from :class:`Settings`, lazily.

Entry points (functions, CLI) call :func:`writer` / :func:`retriever` on first use; nothing is
built at import. Results are cached per (frozen, hashable) settings object, so a warm instance
reuses its clients.
"""

from __future__ import annotations

from functools import cache

from memrepo.repos import UserRepos
from memrepo.retrieval.service import Retriever
from memrepo.settings import Settings
from memrepo.store import open_store
from memrepo.writer import DeterministicWriter, SessionWriter


@cache
def repos(settings: Settings) -> UserRepos:
    """Return the :class:`UserRepos` of the configured store (cached)."""
    return UserRepos(open_store(settings.store_url), tmp_root=settings.tmp_dir)


@cache
def writer(settings: Settings) -> SessionWriter:
    """Return the session writer for ``settings`` (the deterministic engine)."""
    return SessionWriter(repos(settings), DeterministicWriter(), max_attempts=settings.write_max_attempts)


@cache
def retriever(settings: Settings) -> Retriever:
    """Return the retriever for ``settings`` (the deterministic engine)."""
    return Retriever(
        repos(settings),
        agent=None,
        max_tokens_limit=settings.max_tokens_limit,
        deadline_s=settings.retrieval_deadline_ms / 1000,
    )
