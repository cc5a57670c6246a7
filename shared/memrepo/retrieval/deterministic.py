"""The deterministic retrieval engine: ``grep``, BM25 over lines, co-change, no model.

From the last messages of the conversation it takes content words (stemmed so that each stem is
a prefix of the word's inflections, stopwords and question words removed) and the entity names of
``index.md`` they mention, and:

1. runs one ``grep -n -i -F`` for every term over the work tree
   (:mod:`memrepo.retrieval.linesearch`) and scores each matching line with Okapi BM25: a term
   counts where it starts a word of the line's *text* (not the speaker markup of a transcript
   line), its IDF is taken over all the lines of the tree (their number estimated from the
   tree's size, remembered per commit), and line length normalises;
2. treats terms that name a transcript's speaker (``Melanie`` in "What did Melanie paint?") as a
   filter, not a word: lines that speaker said are boosted (:data:`SPEAKER_BOOST`) instead of
   every line that greets her; boosts lines in files changed together with the mentioned
   entities' files (in the last :data:`CO_CHANGE_COMMITS` commits touching them, from a history
   read once per tip, :mod:`memrepo.retrieval.cochange`); weighs notes (profile, timeline,
   entity files) below transcripts and skips a note line whose words a better transcript line
   already holds;
3. turns the best lines into ``file_section`` pointers labelled with the session date and the
   matched words, widened to the reply that follows (and, from :data:`WINDOW_BOTH_FROM` tokens,
   the turn before), overlapping windows merged;
4. always points to ``profile.md`` (``must``) and to the mentioned entities' files.

Per query it runs one ``grep``; once per tip it runs ``git ls-tree`` (the tree's size) and, when
an entity is mentioned, ``git log`` over the commits it has not read yet; it reads ``index.md``.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from memrepo import frontmatter
from memrepo.gitcli import git_text
from memrepo.layout import INDEX, PROFILE
from memrepo.retrieval import cochange
from memrepo.retrieval.linesearch import LineHit, grep_lines
from memrepo.retrieval.plan import Plan, Pointer
from memrepo.text import content_words, stem, words
from memrepo.workspace import Workspace

MAX_TERMS = 32
QUERY_MESSAGES = 3
WINDOW_NEXT_FROM = 0
WINDOW_BOTH_FROM = 4_000
MAX_POINTERS = 200
BM25_K1 = 1.2
BM25_B = 0.75
SPEAKER_BOOST = 1.4
NOTE_WEIGHT = 0.3
CACHE_ENTRIES = 20_000
PROFILE_HEAD_LINES = 12
ENTITY_HEAD_LINES = 12
ENTITY_SCORE = 2.0
CO_CHANGE_COMMITS = 200
_TURN = re.compile(r"^- \*\*(?P<speaker>.+?)\*\* \([^)]*\): ?(?P<content>.*)$")
_DATE = re.compile(r'^occurred_at: "(\d{4}-\d{2}-\d{2})', re.MULTILINE)
_TREE_BYTES: dict[str, Any] = {}  # commit id -> bytes of its tree (immutable, so safe to keep)
_DATES: dict[str, Any] = {}  # "commit:path" -> session date


def stem_term(word: str) -> str:
    """Return the search stem of one word: :func:`memrepo.text.stem`, made a little kinder.

    A doubled final consonant left by a cut suffix is undoubled (``planning`` → ``plan``, not
    ``plann``) and a plural ``s`` is cut down to three letters (``kids`` → ``kid``), so the stem
    is a prefix of every inflection of the word.
    """
    low = word.lower().replace("’", "'")
    term = stem(low)
    if term != low.rstrip("'s").replace("'", "") and len(term) >= 4 and term[-1] == term[-2]:
        if term[-1] not in "lsz" and term[-1].isalpha():
            term = term[:-1]
    if term == low and len(low) == 4 and low.endswith("s") and not low.endswith("ss"):
        term = low[:-1]
    return term


def query_terms(conversation: Sequence[dict[str, str]]) -> list[str]:
    """Return the stemmed search terms of the last messages, the newest user message first."""
    recent = list(conversation)[-QUERY_MESSAGES:]
    ordered = sorted(recent, key=lambda m: (m.get("role") != "user", -recent.index(m)))
    terms: list[str] = []
    for message in ordered:
        for word in content_words(message.get("content", "")):
            term = stem_term(word)
            if len(term) >= 3 and term not in terms:
                terms.append(term)
    return terms[:MAX_TERMS]


def _co_changed(ws: Workspace, head: str, entity_paths: list[str]) -> set[str]:
    """Return the files changed in the same commits as any of ``entity_paths`` (cached per head)."""
    if not entity_paths:
        return set()
    return cochange.LOGS.log(ws.path, head).changed_with(entity_paths, CO_CHANGE_COMMITS)


def _index_rows(ws: Workspace) -> list[tuple[list[str], str]]:
    """Return ``(names and aliases, path)`` of every entity row of ``index.md``."""
    rows = []
    for line in (ws.read(INDEX) or "").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 4 and cells[3].startswith("memories/"):
            names = [cells[0], *(a.strip() for a in cells[1].split(",") if a.strip())]
            rows.append((names, cells[3]))
    return rows


def _mentioned_entities(ws: Workspace, conversation: Sequence[dict[str, str]]) -> list[str]:
    """Return entity paths whose name or alias appears in the last messages (from ``index.md``)."""
    text = " ".join(m.get("content", "") for m in list(conversation)[-QUERY_MESSAGES:])
    said = set(words(text))
    found = []
    for names, path in _index_rows(ws):
        if any(set(words(n)) and set(words(n)) <= said for n in names):
            found.append(path)
    return found


def _session_date(ws: Workspace, head: str, path: str) -> str:
    """Return the ``occurred_at`` date of a transcript (remembered per commit and path)."""
    key = f"{head}:{path}"
    if key not in _DATES:
        found = _DATE.search((ws.read(path) or "")[:400])
        _remember(_DATES, key, found.group(1) if found else "")
    return str(_DATES[key])


def _remember(cache: dict[str, Any], key: str, value: Any) -> Any:
    if len(cache) >= CACHE_ENTRIES:
        cache.pop(next(iter(cache)))
    cache[key] = value
    return value


def _total_lines(ws: Workspace, head: str, hits: list[LineHit]) -> int:
    """Estimate the number of lines in the tree: blob bytes over the mean bytes of a hit line.

    One ``git ls-tree -r -l`` (sizes only, no content read; remembered per commit) stands in for
    counting every line, which would cost a second full scan. IDF only needs the right order of
    magnitude.
    """
    size = _TREE_BYTES.get(head)
    if size is None:
        out = git_text(["ls-tree", "-r", "-l", head], ws.path, check=False)
        size = 0
        for row in out.splitlines():
            parts = row.split(None, 4)
            if len(parts) == 5 and parts[3].isdigit() and not parts[4].startswith(INDEX):
                size += int(parts[3])
        _remember(_TREE_BYTES, head, size)
    mean_len = sum(len(h.text) + 1 for h in hits) / max(len(hits), 1)
    return max(len(hits), int(size / max(mean_len, 20.0)))


def _speaker_terms(terms: list[str], speakers: set[str]) -> set[str]:
    """Return the query terms that name one of ``speakers`` (of the matching transcript lines)."""
    return {t for t in terms if len(t) >= 4 and any(n.startswith(t) for n in speakers)}


def _term_finder(terms: list[str]) -> Callable[[str], list[str]]:
    """Return a function listing, in order, every place one of ``terms`` starts a word of a text.

    "Starts a word": at the start of the text or after a character that is not a letter or digit
    (``_`` included), on the lower-cased text (``terms`` are lower case). Where several terms
    start at one place the longest counts, and matches do not overlap: what
    ``re.findall(r"(?<![^\\W_])(longest|...|shortest)", text, re.IGNORECASE)`` finds, lower-cased
    (property-tested), at a third of its cost: ``in`` and ``str.find`` skip the text in C.
    Lower-casing differs from ``re``'s case folding only for characters it lengthens (``İ``) or
    that fold to another letter (``ſ`` ~ ``s``).
    """
    ordered = sorted(set(terms), key=len, reverse=True)

    def find(text: str) -> list[str]:
        low = text.lower()
        starts: list[tuple[int, int, str]] = []  # (position, -length, term)
        for term in ordered:
            if term not in low:
                continue
            at = low.find(term)
            while at >= 0:
                if at == 0 or not low[at - 1].isalnum():
                    starts.append((at, -len(term), term))
                at = low.find(term, at + 1)
        if len(starts) < 2:
            return [starts[0][2]] if starts else []
        starts.sort()
        found, end = [], 0
        for at, negative_length, term in starts:
            if at >= end:
                found.append(term)
                end = at - negative_length
        return found

    return find


def _window(max_tokens: int) -> tuple[int, int]:
    """Return the turns shown before and after a matching turn for a budget."""
    if max_tokens >= WINDOW_BOTH_FROM:
        return 1, 1
    if max_tokens >= WINDOW_NEXT_FROM:
        return 0, 1
    return 0, 0


def plan(ws: Workspace, conversation: Sequence[dict[str, str]], max_tokens: int) -> Plan:
    """Return the deterministic retrieval plan for the conversation's last messages.

    Args:
        ws: the hydrated repository (read only).
        conversation: ``[{role, content}]``, oldest first.
        max_tokens: the budget the plan will be resolved under (sizes the candidates and the
            window of turns around each match).
    """
    head = ws.head()
    if head is None:
        return Plan(notes="no memory yet")
    pointers = [
        Pointer(kind="file_section", path=PROFILE, start_line=1, end_line=PROFILE_HEAD_LINES,
                reason="who the user is (always loaded)", priority="must")
    ] if ws.read(PROFILE) is not None else []
    terms = query_terms(conversation)
    recent_text = " ".join(m.get("content", "") for m in list(conversation)[-QUERY_MESSAGES:])
    shown = {stem_term(w): w for w in reversed(content_words(recent_text))}
    entities = _mentioned_entities(ws, conversation)
    for path in entities:
        meta, _ = frontmatter.split(ws.read(path) or "")
        pointers.append(
            Pointer(kind="file_section", path=path, start_line=1, end_line=ENTITY_HEAD_LINES,
                    score=ENTITY_SCORE,
                    reason=f"{meta.get('name', path)} is mentioned in the conversation")
        )
    if not terms:
        return Plan(pointers=pointers, notes="no search terms in the conversation")
    lines = grep_lines(ws.path, terms, exclude={INDEX})
    parsed: list[tuple[LineHit, str, str]] = []  # (line, speaker in lower case or "", words)
    for found in lines:  # split transcript lines into speaker and words once
        match = _TURN.match(found.text)
        if match:
            parsed.append((found, match["speaker"].lower(), match["content"]))
        else:
            parsed.append((found, "", found.text))
    named = _speaker_terms(terms, {speaker for _, speaker, _ in parsed if speaker})
    content_terms = [t for t in terms if t not in named] or terms
    find_terms = _term_finder(content_terms)
    line_freq: dict[str, int] = defaultdict(int)
    # the lines holding a content term where a word starts: (line, speaker, words, term counts)
    counted: list[tuple[LineHit, str, str, dict[str, int]]] = []
    lengths: list[int] = []  # their numbers of words
    for found, speaker, body in parsed:
        matched = find_terms(body)
        if not matched:
            continue
        counts = {matched[0]: 1} if len(matched) == 1 else Counter(matched)
        counted.append((found, speaker, body, counts))
        lengths.append(max(1, len(body.split())))
        for term in counts:
            line_freq[term] += 1
    total = _total_lines(ws, head, lines)
    idf = {
        t: math.log(1 + (total - line_freq[t] + 0.5) / (line_freq[t] + 0.5)) for t in content_terms
    }
    mean_len = sum(lengths) / max(len(lengths), 1)
    linked = _co_changed(ws, head, entities)
    scores: list[float] = []
    for (found, speaker, _, counts), length in zip(counted, lengths, strict=True):
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / mean_len)
        if len(counts) == 1:  # most lines: the same float as the sum below, without a generator
            ((t, c),) = counts.items()
            score = idf[t] * c * (BM25_K1 + 1) / (c + norm)
        else:
            score = sum(idf[t] * c * (BM25_K1 + 1) / (c + norm) for t, c in counts.items())
        if named and speaker and any(speaker.startswith(t) for t in named):
            score *= SPEAKER_BOOST
        if not found.path.startswith("sessions/"):
            score *= NOTE_WEIGHT
        if found.path in linked:
            score *= 1.1
        if found.text.startswith(("---", "name:", "cues:", "aliases:")):
            score *= 0.3
        scores.append(score)
    best = sorted(range(len(counted)), key=lambda i: -scores[i])  # stable: ties in path order
    before, after = _window(max_tokens)
    budget_lines = max(40, max_tokens // 12)
    said: set[str] = set()
    for i in best[:budget_lines]:
        found, _, body, counts = counted[i]
        key = " ".join(body.split()).lower()
        if key in said:  # the same words in a note and a transcript: keep the first
            continue
        said.add(key)
        is_session = found.path.startswith("sessions/")
        date = _session_date(ws, head, found.path) if is_session else ""
        where = f"said on {date}" if date else "note"
        start, end = found.line, found.line
        if is_session:  # the turn before (large budgets) and the reply after
            start, end = max(1, found.line - before), found.line + after
        pointers.append(
            Pointer(
                kind="file_section", path=found.path, start_line=start, end_line=end,
                score=round(scores[i], 3),
                reason=f"{where}; matches {', '.join(sorted(shown.get(t, t) for t in counts))}",
                est_tokens=len(found.text) // 3 * (1 + before + after),
            )
        )
    return Plan(pointers=_merge(pointers)[:MAX_POINTERS], notes=f"terms: {', '.join(terms)}")


def _merge(pointers: list[Pointer]) -> list[Pointer]:
    """Merge overlapping ``file_section`` pointers of one file, keeping the best score."""
    merged: list[Pointer] = []
    by_path: dict[str, list[int]] = defaultdict(list)
    for pointer in pointers:
        if pointer.kind != "file_section" or pointer.priority == "must":
            merged.append(pointer)
            continue
        for i in by_path[pointer.path]:
            other = merged[i]
            assert other.start_line is not None and other.end_line is not None
            assert pointer.start_line is not None and pointer.end_line is not None
            start, end = pointer.start_line, pointer.end_line
            if start <= other.end_line + 1 and other.start_line <= end + 1:
                merged[i] = other.model_copy(
                    update={
                        "start_line": min(other.start_line, pointer.start_line),
                        "end_line": max(other.end_line, pointer.end_line),
                        "score": max(other.score, pointer.score)
                        + 0.1 * min(other.score, pointer.score),
                        "est_tokens": other.est_tokens + pointer.est_tokens // 2,
                    }
                )
                break
        else:
            by_path[pointer.path].append(len(merged))
            merged.append(pointer)
    return merged
