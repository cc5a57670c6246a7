"""The LLM writer: a model reads the session and proposes edits; code files and applies them.

For one session, :meth:`LLMWriter.prepare` (which never writes to the workspace):

1. archives the transcript exactly like the deterministic writer
   (:func:`memrepo.transcript.render`);
2. splits the transcript into parts of at most ``chunk_tokens`` tokens (one part for most
   sessions) and, per part, asks the model for :class:`~memrepo.writer.prompts.SessionNotes`,
   showing it the index (names, aliases, types), the notes of the entities the part names, the
   user's profile and the part itself;
3. resolves each entity against the index (name or alias, case-insensitive) and creates new ones
   sparingly (``max_new_entities``), at ``Ontology.entity_path(type, name)``: the path is a slug
   made in code; names that look like paths are refused;
4. applies the fact edits in code (:func:`memrepo.writer.edits.apply_ops`): replaced in place,
   added under ``## Current`` or a dated heading, never duplicated; profile edits to
   ``profile.md``;
5. condenses any file over its cap (the model first, :func:`~memrepo.writer.edits.condense` when
   that fails or does not fit), never truncating silently;
6. inserts the session's timeline entry (:func:`memrepo.timeline.insert`) and rebuilds
   ``index.md`` in code from front matter (:func:`memrepo.index.render`).

The commit message is the model's (one line); the plan's trailers say ``Writer: llm:<model>``,
``LLM-Calls``, ``LLM-Tokens: <in>/<out>`` and ``LLM-Edits``. Calls, tokens and time per session are
capped (:class:`~memrepo.llm.base.Budget`, ``deadline_s``); any failure raises an
:class:`~memrepo.errors.LLMError` (wrap the engine in
:class:`~memrepo.writer.fallback.FallbackWriter` so the session still commits).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from memrepo import frontmatter, index, timeline, tokens, transcript
from memrepo.errors import LLMBadOutput, LLMBudgetExceeded, LLMError
from memrepo.events import SessionEnded
from memrepo.ids import slugify
from memrepo.layout import DEFAULT_ONTOLOGY, INDEX, PROFILE, Ontology, session_path
from memrepo.llm.base import Budget, ChatModel
from memrepo.workspace import Workspace
from memrepo.writer.base import CommitPlan, WriterEngine
from memrepo.writer.deterministic import ENTITY_MAX_BYTES, PROFILE_MAX_BYTES
from memrepo.writer.edits import (
    EditStats,
    FactOp,
    apply_ops,
    clean_fact,
    clean_name,
    condense,
    render_sections,
)
from memrepo.writer.prompts import (
    CONDENSE_SYSTEM,
    Condensed,
    SessionNotes,
    writer_system,
    writer_user,
)

log = logging.getLogger(__name__)

MIN_CAP_BYTES = 2_048
_TRAILER_UNSAFE = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass
class _State:
    """The memory as it is being changed during one ``prepare``."""

    files: dict[str, str]
    known: dict[str, str]
    profile: str
    changed: set[str] = field(default_factory=set)
    profile_changed: bool = False
    new_entities: int = 0
    refused_names: int = 0
    unknown_entities: int = 0
    stats: EditStats = field(default_factory=EditStats)


def _one_line(text: str, limit: int) -> str:
    """Return ``text`` on one line, control characters removed, at most ``limit`` characters."""
    return " ".join(_TRAILER_UNSAFE.sub(" ", text).split())[:limit].strip()


def _subject(text: str) -> str:
    """Return the first non-empty line of a model's commit message, cleaned, at most 100 chars."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    return _one_line(first, 100)


class LLMWriter(WriterEngine):
    """A :class:`WriterEngine` driven by a chat model (see the module docstring)."""

    name = "llm"

    def __init__(
        self,
        chat: ChatModel,
        *,
        ontology: Ontology = DEFAULT_ONTOLOGY,
        max_calls: int = 8,
        max_tokens: int = 60_000,
        deadline_s: float = 240.0,
        entity_max_bytes: int = ENTITY_MAX_BYTES,
        profile_max_bytes: int = PROFILE_MAX_BYTES,
        chunk_tokens: int = 6_000,
        answer_tokens: int = 4_000,
        max_new_entities: int = 8,
        max_shown_bytes: int = 24_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
        chat: the chat model (an :class:`~memrepo.llm.client.OpenAIChat` in production).
        ontology: entity types and their folders.
        max_calls: HTTP requests per session (retries and repair rounds count).
        max_tokens: prompt plus completion tokens per session.
        deadline_s: seconds of LLM work per session before giving up.
        entity_max_bytes: UTF-8 size cap of an entity file, front matter included (>= 2048).
        profile_max_bytes: UTF-8 size cap of ``profile.md`` (>= 2048).
        chunk_tokens: transcript tokens per model call; longer sessions take several calls.
        answer_tokens: completion tokens allowed per call.
        max_new_entities: entities a session may create.
        max_shown_bytes: bytes of entity notes shown in full per call.
        clock: the monotonic clock of the deadline.

        Raises:
            ValueError: a cap is below 2048 bytes.
        """
        if min(entity_max_bytes, profile_max_bytes) < MIN_CAP_BYTES:
            raise ValueError(f"file caps must be at least {MIN_CAP_BYTES} bytes")
        self.chat = chat
        self.ontology = ontology
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.deadline_s = deadline_s
        self.entity_max_bytes = entity_max_bytes
        self.profile_max_bytes = profile_max_bytes
        self.chunk_tokens = chunk_tokens
        self.answer_tokens = answer_tokens
        self.max_new_entities = max_new_entities
        self.max_shown_bytes = max_shown_bytes
        self._clock = clock

    @property
    def model(self) -> str:
        """The model name recorded in the ``Writer:`` trailer."""
        return str(getattr(self.chat, "model", "unknown"))

    def prepare(self, ws: Workspace, event: SessionEnded) -> CommitPlan:
        """Return the commit plan of ``event`` (nothing is written to ``ws``).

        Raises:
            LLMUnavailable, LLMRejected, LLMBadOutput, LLMBudgetExceeded: the model could not
                produce valid notes within the session's caps.
            GitError: reading the workspace failed.
        """
        deadline = self._clock() + self.deadline_s
        budget = Budget(max_calls=self.max_calls, max_tokens=self.max_tokens)
        date = f"{event.occurred_at:%Y-%m-%d}"
        tpath = session_path(event.session_id, event.occurred_at)
        state = self._load(ws)
        users = sorted({t.speaker for t in event.turns if t.role == "user"}) or [event.user_id]
        if not frontmatter.split(state.profile)[1].strip():
            state.profile = frontmatter.render({}, f"# {clean_name(users[0]) or event.user_id}\n")
        chunks = self._chunks(event)
        if len(chunks) > self.max_calls:
            raise LLMBudgetExceeded(
                f"session {event.session_id} needs {len(chunks)} calls of {self.chunk_tokens} "
                f"tokens; the cap is {self.max_calls} calls"
            )
        system = writer_system(self.ontology, " / ".join(users), self.max_new_entities)
        message, summary = "", ""
        for number, chunk in enumerate(chunks, 1):
            part = f" (part {number} of {len(chunks)})" if len(chunks) > 1 else ""
            header = (
                f"Session {event.session_id} on {event.occurred_at:%Y-%m-%d %H:%M}{part}, "
                f"{len(event.turns)} turns. The user is {' / '.join(users)}."
            )
            user_message = writer_user(
                header=header,
                earlier=summary or None,
                index_rows=self._index_rows(state, chunk),
                shown=self._shown(state, chunk),
                profile=frontmatter.split(state.profile)[1],
                transcript=chunk,
            )
            result = self.chat.chat(
                [{"role": "system", "content": system}, {"role": "user", "content": user_message}],
                response_model=SessionNotes,
                max_tokens=self.answer_tokens,
                deadline=deadline,
                budget=budget,
            )
            notes = result.parsed
            if notes is None:  # a model that answered with tool calls
                raise LLMBadOutput(f"LLM {self.model} answered without notes")
            self._apply(notes, state, event, date, users)
            message = _subject(notes.commit_message) or message
            summary = " ".join(filter(None, [summary, _one_line(notes.summary, 1_200)]))[-2_000:]

        for path in sorted(state.changed):
            state.files[path] = self._fit(
                state.files[path], self.entity_max_bytes, date, budget, deadline
            )
        state.profile = self._profile(state.profile, event, date)
        state.profile = self._fit(state.profile, self.profile_max_bytes, date, budget, deadline)

        files: dict[str, str] = {tpath: transcript.render(event)}
        files.update({p: state.files[p] for p in sorted(state.changed)})
        files[PROFILE] = state.profile
        names = sorted(
            {str(frontmatter.split(state.files[p])[0].get("name")) for p in state.changed}
        )
        entry = timeline.Entry(
            when=event.occurred_at,
            session_id=event.session_id,
            text=(
                f"{clean_fact(summary, 1_200) or 'Session recorded.'}\n"
                f"People and contexts: {', '.join(names) or 'none'}.\nTranscript: {tpath}"
            ),
        )
        tl_path, tl_text = timeline.insert(ws, entry)
        files[tl_path] = tl_text
        files[INDEX] = index.render(state.files)
        s = state.stats
        log.info(
            "llm writer prepared session",
            extra={
                "user_id": event.user_id,
                "session_id": event.session_id,
                "calls": budget.calls,
                "prompt_tokens": budget.prompt_tokens,
                "completion_tokens": budget.completion_tokens,
                "added": s.added,
                "replaced": s.replaced,
                "removed": s.removed,
                "duplicates": s.duplicates,
                "new_entities": state.new_entities,
                "refused_names": state.refused_names,
                "unknown_entities": state.unknown_entities,
            },
        )
        return CommitPlan(
            files=files,
            message=message or f"Session {event.session_id} on {date}",
            writer=f"llm:{_one_line(self.model, 100)}",
            extra_trailers={
                "LLM-Calls": str(budget.calls),
                "LLM-Tokens": f"{budget.prompt_tokens}/{budget.completion_tokens}",
                "LLM-Edits": (
                    f"added {s.added}, replaced {s.replaced}, removed {s.removed}, "
                    f"duplicates {s.duplicates}, new entities {state.new_entities}"
                ),
            },
        )

    # -- reading ---------------------------------------------------------------------------------

    def _load(self, ws: Workspace) -> _State:
        files = {p: ws.read(p) or "" for p in ws.files("memories/")}
        known: dict[str, str] = {}
        for path, text in sorted(files.items()):
            meta, _ = frontmatter.split(text)
            for alias in [meta.get("name"), *(meta.get("aliases") or [])]:
                if isinstance(alias, str) and alias.strip():
                    known.setdefault(alias.strip().lower(), path)
        return _State(files=files, known=known, profile=ws.read(PROFILE) or "")

    def _chunks(self, event: SessionEnded) -> list[str]:
        """Return the transcript as Markdown turn lines, in parts of ~``chunk_tokens`` tokens."""
        chunks: list[str] = []
        lines: list[str] = []
        size = 0
        for turn in event.turns:
            line = transcript.render_turn(turn)
            cost = tokens.count(line) + 1
            if lines and size + cost > self.chunk_tokens:
                chunks.append("\n".join(lines))
                lines, size = [], 0
            lines.append(line)
            size += cost
        if lines:
            chunks.append("\n".join(lines))
        return chunks

    def _mentions(self, state: _State, text: str) -> dict[str, int]:
        """Return how often each entity path is named (name or alias) in ``text``."""
        low = text.lower()
        counts: dict[str, int] = {}
        for alias, path in state.known.items():
            if len(alias) < 3:
                continue
            found = len(re.findall(rf"(?<!\w){re.escape(alias)}(?!\w)", low))
            if found:
                counts[path] = counts.get(path, 0) + found
        for path in state.changed:
            counts[path] = counts.get(path, 0) + 1
        return counts

    def _index_rows(self, state: _State, chunk: str, limit: int = 400) -> list[str]:
        mentions = self._mentions(state, chunk)
        rows = sorted(index.entries(state.files), key=lambda e: e.last_date, reverse=True)
        rows.sort(key=lambda e: -mentions.get(e.path, 0))  # named in this part first, then recent
        return [f"{e.name} | {', '.join(e.aliases) or '-'} | {e.type}" for e in rows[:limit]]

    def _shown(self, state: _State, chunk: str) -> list[tuple[str, str]]:
        mentions = self._mentions(state, chunk)
        shown: list[tuple[str, str]] = []
        used = 0
        for path in sorted(mentions, key=lambda p: (-mentions[p], p)):
            meta, body = frontmatter.split(state.files.get(path, ""))
            size = len(body.encode())
            if used + size > self.max_shown_bytes or len(shown) >= 10:
                continue
            used += size
            shown.append((f"{meta.get('name')} ({meta.get('type') or 'entity'})", body))
        return shown

    # -- applying --------------------------------------------------------------------------------

    def _apply(
        self, notes: SessionNotes, state: _State, event: SessionEnded, date: str, users: list[str]
    ) -> None:
        user_names = {u.lower() for u in users}
        for entity in notes.entities:
            name = clean_name(entity.name)
            if name is None:
                state.refused_names += 1
                continue
            if name.lower() in user_names:
                continue
            aliases = [
                a
                for a in (clean_name(x) for x in entity.aliases)
                if a and a.lower() not in user_names
            ]
            path = state.known.get(name.lower()) or next(
                (state.known[a.lower()] for a in aliases if a.lower() in state.known), None
            )
            if path is None:
                if state.new_entities >= self.max_new_entities:
                    state.refused_names += 1
                    continue
                path = self._new_file(state, name, entity.type)
                state.new_entities += 1
            for alias in [name, *aliases]:
                state.known.setdefault(alias.lower(), path)
            self._touch(state, path, event, date, aliases, entity.cues)

        grouped: dict[str, list[FactOp]] = {}
        for edit in notes.edits:
            name = clean_name(edit.entity)
            if name is not None and name.lower() in user_names:
                grouped.setdefault(PROFILE, []).append(edit)
                continue
            path = state.known.get(name.lower()) if name else None
            if path is None:
                state.unknown_entities += 1
                continue
            grouped.setdefault(path, []).append(edit)
        grouped.setdefault(PROFILE, []).extend(notes.profile)

        for path, ops in grouped.items():
            text = state.profile if path == PROFILE else state.files[path]
            meta, body = frontmatter.split(text)
            body, stats = apply_ops(body, ops, date)
            state.stats.merge(stats)
            if not stats.touched:
                continue
            if path == PROFILE:
                state.profile, state.profile_changed = frontmatter.render(meta, body), True
            else:
                state.files[path] = frontmatter.render(meta, body)
                self._touch(state, path, event, date, [], [])

    def _new_file(self, state: _State, name: str, type_name: str) -> str:
        """Create the text of a new entity; return its path (a code-made slug, unique)."""
        kind = type_name.strip().lower()
        if kind not in {t.name for t in self.ontology.types}:
            kind = self.ontology.types[-1].name
        folder, slug = self.ontology.folder(kind), slugify(name)
        path = f"{folder}/{slug}.md"
        n = 2
        while path in state.files:
            path = f"{folder}/{slug}-{n}.md"
            n += 1
        meta: dict[str, Any] = {"name": name, "aliases": [], "type": kind, "cues": []}
        state.files[path] = frontmatter.render(meta, f"# {name}\n")
        return path

    def _touch(
        self,
        state: _State,
        path: str,
        event: SessionEnded,
        date: str,
        aliases: Iterable[str],
        cues: Iterable[str],
    ) -> None:
        """Merge aliases and cues into an entity's front matter and mark the session on it."""
        meta, body = frontmatter.split(state.files[path])
        name = str(meta.get("name") or "")
        old_aliases = [str(a) for a in meta.get("aliases") or []]
        merged = [a for a in dict.fromkeys([*old_aliases, *aliases]) if a.lower() != name.lower()]
        new_cues = [c for c in (clean_fact(x, 40).lower() for x in cues) if c]
        all_cues = list(dict.fromkeys([*(str(c) for c in meta.get("cues") or []), *new_cues]))
        meta["aliases"] = merged[:10]
        meta["cues"] = all_cues[-12:]
        if date >= str(meta.get("last_date") or ""):
            meta["last_session"] = event.session_id
            meta["last_date"] = date
        state.files[path] = frontmatter.render(meta, body)
        state.changed.add(path)

    def _profile(self, old: str, event: SessionEnded, date: str) -> str:
        """Return ``profile.md`` with the session counted (fields as the deterministic writer's)."""
        meta, body = frontmatter.split(old)
        users = [t.speaker for t in event.turns if t.role == "user"]
        name = str(meta.get("name") or (users[0] if users else event.user_id))
        meta = {
            **meta,
            "name": name,
            "user_id": event.user_id,
            "type": "profile",
            "sessions": int(meta.get("sessions") or 0) + 1,
            "first_date": min(str(meta.get("first_date") or date), date),
            "last_date": max(str(meta.get("last_date") or date), date),
        }
        return frontmatter.render(meta, body if body.strip() else f"# {name}\n")

    # -- size caps -------------------------------------------------------------------------------

    def _fit(self, text: str, cap: int, date: str, budget: Budget, deadline: float) -> str:
        """Return ``text`` within ``cap`` bytes: condensed by the model, else in code."""
        if len(text.encode()) <= cap:
            return text
        meta, body = frontmatter.split(text)
        room = cap - len(frontmatter.render(meta, "").encode())
        name = str(meta.get("name") or "note")
        condensed: str | None = None
        try:
            condensed = self._condense_with_model(name, body, room, date, budget, deadline)
        except LLMError as exc:
            log.info(
                "model condense failed; condensing in code", extra={"error": type(exc).__name__}
            )
        if condensed is None or len(condensed.encode()) > room:
            condensed, dropped = condense(condensed or body, room)
            log.info("condensed in code", extra={"entity": name, "dropped_lines": dropped})
        return frontmatter.render(meta, condensed)

    def _condense_with_model(
        self, name: str, body: str, room: int, date: str, budget: Budget, deadline: float
    ) -> str:
        limit = max(400, int(room * 0.7))
        result = self.chat.chat(
            [
                {"role": "system", "content": CONDENSE_SYSTEM.format(name=name, limit=limit)},
                {"role": "user", "content": f"=== note ===\n{body.strip()}\n=== end of note ==="},
            ],
            response_model=Condensed,
            max_tokens=self.answer_tokens,
            deadline=deadline,
            budget=budget,
        )
        if result.parsed is None:
            raise LLMBadOutput(f"LLM {self.model} answered the condense request without notes")
        out = render_sections(
            name, result.parsed.current, [(n.date, n.facts) for n in result.parsed.notes]
        )
        title, _, rest = out.partition("\n")
        marker = f"_(condensed on {date}; earlier wording in `git log -p` of this file)_"
        return f"{title}\n\n{marker}\n{rest}"
