"""The composition root: build the real adapters and services from :class:`Settings`, lazily.

Entry points (functions, CLI) call :func:`writer` / :func:`retriever` on first use; nothing is
built at import, and nothing beyond :class:`Settings` is imported either: each builder imports
what it needs, so the writer function never loads the retrieval engine and vice versa (a cold
start pays for its own path only). Results are cached per (frozen, hashable) settings object, so
a warm instance reuses its clients.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from memrepo.settings import Settings

if TYPE_CHECKING:
    from memrepo.operations.apply import AfterSave, RepoChanger
    from memrepo.operations.mirror import Mirror
    from memrepo.operations.rebuild import Rebuilder
    from memrepo.repocache import RepoCache
    from memrepo.repos import UserRepos
    from memrepo.retrieval.service import Retriever
    from memrepo.writer import SessionWriter, WriterEngine


@cache
def repos(settings: Settings) -> UserRepos:
    """Return the :class:`UserRepos` of the configured store (cached), with the warm-instance
    repository cache unless ``cache_max_bytes`` is 0 (see :mod:`memrepo.repocache`).

    The cache is opened by the first checkout of stored memory (a user without memory, or a new
    user's first write, has nothing to cache), so such requests never load it.
    """
    from memrepo.repos import UserRepos
    from memrepo.store import open_store

    repo_cache: Callable[[], RepoCache] | None = None
    if settings.cache_max_bytes > 0:

        def repo_cache() -> RepoCache:
            import tempfile

            from memrepo.repocache import RepoCache

            root = settings.cache_dir or Path(tempfile.gettempdir()) / "memrepo-cache"
            return RepoCache(root, settings.cache_max_bytes)

    return UserRepos(open_store(settings.store_url), tmp_root=settings.tmp_dir, cache=repo_cache,
                     max_increments=settings.chain_max_increments)


def writer_engine(settings: Settings) -> WriterEngine:
    """Return the writer engine for ``settings``.

    With ``settings.use_llm``: the LLM writer on the configured endpoint and writer model, its
    per-session caps from settings, falling back to the deterministic writer (commit marked
    ``Writer: deterministic (llm failed: ...)``). Otherwise the deterministic writer. Both use
    the ontology of ``settings.ontology_path`` (people and contexts by default).

    Raises:
        OSError, ValueError: the ontology file cannot be read or is invalid.
    """
    from memrepo.layout import load_ontology
    from memrepo.writer.deterministic import DeterministicWriter

    ontology = load_ontology(settings.ontology_path)
    deterministic = DeterministicWriter(ontology)
    if not settings.use_llm:
        return deterministic
    from memrepo.llm.client import OpenAIChat
    from memrepo.writer import FallbackWriter, LLMWriter

    llm = LLMWriter(
        OpenAIChat.from_settings(settings, "writer"),
        ontology=ontology,
        max_calls=settings.writer_max_llm_calls,
        max_tokens=settings.writer_max_llm_tokens,
        deadline_s=settings.writer_deadline_s,
    )
    return FallbackWriter(llm, deterministic)


@cache
def writer(settings: Settings) -> SessionWriter:
    """Return the session writer for ``settings`` (engine: see :func:`writer_engine`)."""
    from memrepo.writer.service import SessionWriter

    return SessionWriter(
        repos(settings),
        writer_engine(settings),
        max_attempts=settings.write_max_attempts,
        after_save=after_save(settings),
    )


@cache
def mirror(settings: Settings) -> Mirror | None:
    """Return the git mirror of ``settings.mirror_url`` (cached), or ``None`` when unset.

    The token is ``settings.mirror_token``, else read from Secret Manager
    (``settings.mirror_token_secret``) on the first push, else none.

    Raises:
        MirrorConfigError: the URL is not an accepted remote.
    """
    if not settings.mirror_url:
        return None
    from memrepo.operations.mirror import Mirror

    token: str | Callable[[], str | None] | None = None
    if settings.mirror_token is not None:
        token = settings.mirror_token.get_secret_value()
    elif settings.mirror_token_secret:
        name = settings.mirror_token_secret

        def token() -> str | None:
            from memrepo.adapters.secrets import access_secret

            return access_secret(name)

    return Mirror(
        settings.mirror_url,
        token=token,
        username=settings.mirror_username,
        timeout_s=settings.mirror_timeout_s,
        background=settings.mirror_background,
    )


def after_save(settings: Settings) -> list[AfterSave]:
    """Return the hooks every save runs afterwards: the mirror's push when one is configured."""
    found = mirror(settings)
    return [found.hook] if found is not None else []


@cache
def changer(settings: Settings) -> RepoChanger:
    """Return the change runner for operations (revert, onboard, rebuild's save), cached."""
    from memrepo.operations.apply import RepoChanger

    return RepoChanger(
        repos(settings), max_attempts=settings.write_max_attempts, after_save=after_save(settings)
    )


def rebuilder(settings: Settings, *, checkpoint_every: int = 5) -> Rebuilder:
    """Return a rebuilder with the current writer engine, checkpointing in the same store."""
    from memrepo.operations.rebuild import Rebuilder

    return Rebuilder(
        changer(settings),
        writer_engine(settings),
        repos(settings).store,
        checkpoint_every=checkpoint_every,
    )


@cache
def retriever(settings: Settings) -> Retriever:
    """Return the retriever for ``settings`` (cached).

    With ``settings.use_llm``: the LLM retrieval agent on the configured endpoint and
    ``retrieval_model`` (one repair round for an invalid plan, ``retrieval_max_turns`` turns),
    falling back to the deterministic plan; otherwise the deterministic engine alone. Each
    request's ``deadline_ms`` (else ``retrieval_deadline_ms``) bounds hydration, the agent, the
    fallback and the resolver.
    """
    from memrepo.retrieval.service import Retriever

    agent = None
    if settings.use_llm:
        from memrepo.llm.client import OpenAIChat
        from memrepo.retrieval.agent import RetrievalAgent

        agent = RetrievalAgent(
            OpenAIChat.from_settings(settings, "retrieval", max_repairs=1),
            max_turns=settings.retrieval_max_turns,
        )
    return Retriever(
        repos(settings),
        agent=agent,
        max_tokens_limit=settings.max_tokens_limit,
        deadline_s=settings.retrieval_deadline_ms / 1000,
    )
