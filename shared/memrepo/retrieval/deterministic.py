"""The deterministic retrieval engine: ``git grep``, recency and co-change, no model.

From the last messages of the conversation it takes content words (stemmed, stopwords removed)
and the entity names of ``index.md`` they mention, and:

1. runs one ``git grep -n -i -F`` for every term over the working tree, and weighs each matching
   line by the inverse line-frequency of the terms it holds (rare words count more, BM25-like);
2. boosts lines in files that changed together with the mentioned entities' files (commits from
   ``git log --name-only`` touching an entity file also touched these sessions) and, slightly,
   lines in recently changed files;
3. turns the best lines into ``file_section`` pointers with one neighbouring line either side (the
   turn before and after, in a transcript), labelled with the session date and matched words;
4. always points to ``profile.md`` (``must``) and to the mentioned entities' files.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from memrepo import frontmatter, index
from memrepo.gitcli import git_text
from memrepo.layout import INDEX, PROFILE
from memrepo.retrieval.plan import Plan, Pointer
from memrepo.text import content_words, stem, words
from memrepo.workspace import Workspace

MAX_TERMS = 32
QUERY_MESSAGES = 3
NEIGHBOURS = 1
RECENT_COMMITS = 15
PROFILE_HEAD_LINES = 12
ENTITY_HEAD_LINES = 12
ENTITY_SCORE = 8.0
_DATE = re.compile(r'^occurred_at: "(\d{4}-\d{2}-\d{2})', re.MULTILINE)


@dataclass
class _Hit:
    path: str
    line: int
    text: str
    terms: set[str] = field(default_factory=set)
    score: float = 0.0


def query_terms(conversation: Sequence[dict[str, str]]) -> list[str]:
    """Return the stemmed search terms of the last messages, the newest user message first."""
    recent = list(conversation)[-QUERY_MESSAGES:]
    ordered = sorted(recent, key=lambda m: (m.get("role") != "user", -recent.index(m)))
    terms: list[str] = []
    for message in ordered:
        for word in content_words(message.get("content", "")):
            term = stem(word)
            if len(term) >= 3 and term not in terms:
                terms.append(term)
    return terms[:MAX_TERMS]


def _grep(ws: Workspace, terms: list[str]) -> list[_Hit]:
    args = ["grep", "-n", "-I", "-i", "-F", "--no-color", "--untracked"]
    for term in terms:
        args += ["-e", term]
    args += ["--", ".", f":!{INDEX}"]
    out = git_text(args, ws.path, check=False)
    hits = []
    for row in out.splitlines():
        path, _, rest = row.partition(":")
        number, _, text = rest.partition(":")
        if number.isdigit():
            hits.append(_Hit(path, int(number), text))
    return hits


def _co_changed(ws: Workspace, entity_paths: list[str]) -> set[str]:
    """Return the files changed in the same commits as any of ``entity_paths``."""
    if not entity_paths:
        return set()
    out = git_text(["log", "--format=", "--name-only", "-200", "--", *entity_paths], ws.path)
    paths = set()
    commits = git_text(["log", "--format=%H", "-200", "--", *entity_paths], ws.path).split()
    if commits:
        shown = git_text(["show", "--format=", "--name-only", *commits[:200]], ws.path)
        paths = {p for p in shown.splitlines() if p}
    return paths | {p for p in out.splitlines() if p}


def _recent(ws: Workspace) -> set[str]:
    out = git_text(["log", "--format=", "--name-only", f"-{RECENT_COMMITS}"], ws.path)
    return {p for p in out.splitlines() if p}


def _mentioned_entities(ws: Workspace, conversation: Sequence[dict[str, str]]) -> list[str]:
    """Return entity paths whose name or alias appears in the last messages."""
    text = " ".join(m.get("content", "") for m in list(conversation)[-QUERY_MESSAGES:])
    said = set(words(text))
    files = {p: ws.read(p) or "" for p in ws.files("memories/")}
    found = []
    for entry in index.entries(files):
        names = [entry.name, *entry.aliases]
        if any(set(words(n)) and set(words(n)) <= said for n in names):
            found.append(entry.path)
    return found


def _session_date(ws: Workspace, path: str, cache: dict[str, str]) -> str:
    if path not in cache:
        head = (ws.read(path) or "")[:400]
        found = _DATE.search(head)
        cache[path] = found.group(1) if found else ""
    return cache[path]


def plan(ws: Workspace, conversation: Sequence[dict[str, str]], max_tokens: int) -> Plan:
    """Return the deterministic retrieval plan for the conversation's last messages.

    Args:
        ws: the hydrated repository (read only).
        conversation: ``[{role, content}]``, oldest first.
        max_tokens: the budget the plan will be resolved under (used to size the candidates).
    """
    if ws.head() is None:
        return Plan(notes="no memory yet")
    pointers = [
        Pointer(kind="file_section", path=PROFILE, start_line=1, end_line=PROFILE_HEAD_LINES,
                reason="who the user is (always loaded)", priority="must")
    ] if ws.read(PROFILE) is not None else []
    terms = query_terms(conversation)
    recent_text = " ".join(m.get("content", "") for m in list(conversation)[-QUERY_MESSAGES:])
    shown = {stem(w): w for w in reversed(content_words(recent_text))}
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
    hits = _grep(ws, terms)
    line_freq: dict[str, int] = defaultdict(int)
    for hit in hits:
        low = hit.text.lower()
        hit.terms = {t for t in terms if t in low}
        for term in hit.terms:
            line_freq[term] += 1
    total_lines = max(len(hits), 1) * 4 + 100
    idf = {t: math.log(1 + total_lines / (1 + line_freq[t])) for t in terms}
    linked = _co_changed(ws, entities)
    recent = _recent(ws)
    for hit in hits:
        hit.score = sum(idf[t] for t in hit.terms)
        if hit.path in linked:
            hit.score *= 1.3
        if hit.path in recent:
            hit.score *= 1.05
        if hit.text.startswith(("---", "name:", "cues:", "aliases:")):
            hit.score *= 0.3
    hits.sort(key=lambda h: -h.score)
    budget_lines = max(40, max_tokens // 12)
    dates: dict[str, str] = {}
    chosen: dict[str, list[_Hit]] = defaultdict(list)
    for hit in hits[:budget_lines]:
        chosen[hit.path].append(hit)
    for path, file_hits in chosen.items():
        for hit in file_hits:
            start = max(1, hit.line - NEIGHBOURS)
            end = hit.line + NEIGHBOURS
            date = _session_date(ws, path, dates) if path.startswith("sessions/") else ""
            where = f"said on {date}" if date else "note"
            pointers.append(
                Pointer(
                    kind="file_section", path=path, start_line=start, end_line=end,
                    score=round(hit.score, 3),
                    reason=f"{where}; matches {', '.join(sorted(shown.get(t, t) for t in hit.terms))}",
                    est_tokens=len(hit.text) // 3 * (2 * NEIGHBOURS + 1),
                )
            )
    return Plan(pointers=_merge(pointers), notes=f"terms: {', '.join(terms)}")


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
            if pointer.start_line <= other.end_line + 1 and other.start_line <= pointer.end_line + 1:
                merged[i] = other.model_copy(
                    update={
                        "start_line": min(other.start_line, pointer.start_line),
                        "end_line": max(other.end_line, pointer.end_line),
                        "score": max(other.score, pointer.score) + 0.1 * min(other.score, pointer.score),
                        "est_tokens": other.est_tokens + pointer.est_tokens // 2,
                    }
                )
                break
        else:
            by_path[pointer.path].append(len(merged))
            merged.append(pointer)
    return merged
