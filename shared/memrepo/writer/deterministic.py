"""The deterministic writer: no network, no model, the same files for the same sessions.

For each session it archives the transcript, inserts a dated timeline entry (ordered by
``occurred_at``, so out-of-order deliveries land in place), creates or updates a file per person
(every speaker other than the user, and people the speakers name), updates ``profile.md`` with the
user's own statements, and rebuilds ``index.md`` from front matter. Every file is capped in size
and condensed (older entries summarised, with a pointer to git history) rather than cut silently.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from memrepo import frontmatter, index, timeline, transcript
from memrepo.events import SessionEnded, Turn
from memrepo.layout import DEFAULT_ONTOLOGY, INDEX, PROFILE, Ontology, session_path
from memrepo.text import STOPWORDS, keywords, split_lines
from memrepo.workspace import Workspace
from memrepo.writer.base import CommitPlan, WriterEngine

ENTITY_MAX_BYTES = 12_000
PROFILE_MAX_BYTES = 8_000
MAX_NEW_PEOPLE_PER_SESSION = 5

_NAME = re.compile(r"(?<![\w'’])([A-Z][a-z]{2,}(?:[’'][a-z]+)?)")
_RELATION = re.compile(
    r"\b(?:friend|sister|brother|mom|mum|mother|dad|father|wife|husband|son|daughter|boss|"
    r"partner|colleague|cousin|aunt|uncle|grandma|grandpa|kid|girlfriend|boyfriend|neighbor|"
    r"neighbour|coworker|named|called)\s+$",
    re.IGNORECASE,
)
_SELF = re.compile(r"\b(?:I am|I'm|I’m|I have|I've|I’ve|my|I work|I live|I love|I like)\b")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_NOT_NAMES = frozenset(
    """monday tuesday wednesday thursday friday saturday sunday january february march april may
    june july august september october november december christmas easter thanksgiving halloween
    english spanish french german chinese korean japanese god lol omg thanks thank sorry hello
    wow yeah yes okay sure great awesome good nice cool really well congrats
    congratulations""".split()
)


@dataclass(frozen=True)
class _Person:
    name: str
    spoke: int
    mentions: int
    cue_words: tuple[str, ...]


def _canonical(name: str, speakers: Counter[str], known: dict[str, str]) -> str:
    """Map a short form to a speaker it abbreviates (``Mel`` → ``Melanie``), else keep it."""
    for speaker in speakers:
        if speaker != name and speaker.startswith(name):
            return speaker
    return name


def _people(event: SessionEnded, known: dict[str, str]) -> list[_Person]:
    """Return the people of a session: non-user speakers, then names the speakers mention."""
    user_names = {t.speaker for t in event.turns if t.role == "user"}
    # the assistant (the bot itself) is not a person in the user's life
    bot_names = {t.speaker for t in event.turns if t.role == "assistant"} - user_names
    spoke: Counter[str] = Counter(t.speaker for t in event.turns if t.role == "other")
    mentions: Counter[str] = Counter()
    cued: set[str] = set()
    lines: dict[str, list[str]] = {}
    for turn in event.turns:
        lines.setdefault(turn.speaker, []).append(turn.content)
        for sentence in _SENTENCE.split(turn.content):
            for match in _NAME.finditer(sentence):
                name = match.group(1).replace("’", "'").split("'")[0]
                low = name.lower()
                if match.start() == 0 or low in STOPWORDS or low in _NOT_NAMES:
                    if low not in known:
                        continue
                if name in user_names | bot_names or any(u.startswith(name) for u in user_names):
                    continue
                name = _canonical(name, spoke, known)
                mentions[name] += 1
                lines.setdefault(name, []).append(sentence)
                if _RELATION.search(sentence[: match.start()]):
                    cued.add(name)
    people = [
        _Person(name, count, mentions[name], tuple(keywords(lines.get(name, []), 6)))
        for name, count in spoke.items()
    ]
    new = 0
    for name, count in mentions.most_common():
        if name in spoke:
            continue
        if name.lower() in known:
            people.append(_Person(name, 0, count, tuple(keywords(lines[name], 6))))
        elif (name in cued or count >= 2) and new < MAX_NEW_PEOPLE_PER_SESSION:
            new += 1
            people.append(_Person(name, 0, count, tuple(keywords(lines[name], 6))))
    return people


def _condense(head: str, entries: list[str], cap: int, what: str) -> str:
    """Join ``head`` and ``entries`` (oldest first); summarise the oldest until under ``cap``."""
    dropped = 0
    while entries and len((head + "\n".join(entries)).encode()) > cap:
        entries = entries[1:]
        dropped += 1
    if dropped:
        entries = [
            f"- ({dropped} earlier {what} condensed; see `git log -p` of this file)",
            *[e for e in entries if not e.startswith("- (")],
        ]
    return head + "\n".join(entries) + "\n"


class DeterministicWriter(WriterEngine):
    """A :class:`WriterEngine` that needs no model (see the module docstring)."""

    name = "deterministic"

    def __init__(self, ontology: Ontology = DEFAULT_ONTOLOGY) -> None:
        self.ontology = ontology

    def prepare(self, ws: Workspace, event: SessionEnded) -> CommitPlan:
        """Return the files of ``event`` on top of the workspace's state (nothing is written)."""
        date = f"{event.occurred_at:%Y-%m-%d}"
        files: dict[str, str] = {}
        tpath = session_path(event.session_id, event.occurred_at)
        files[tpath] = transcript.render(event)

        entity_files = {p: ws.read(p) or "" for p in ws.files("memories/")}
        known: dict[str, str] = {}
        for path, text in entity_files.items():
            meta, _ = frontmatter.split(text)
            for alias in [meta.get("name"), *(meta.get("aliases") or [])]:
                if isinstance(alias, str) and alias:
                    known[alias.lower()] = path

        people = _people(event, known)
        for person in people:
            path = known.get(person.name.lower()) or self.ontology.entity_path(
                "person", person.name
            )
            files[path] = self._person_file(entity_files.get(path, ""), person, event, date)
            entity_files[path] = files[path]

        user_turns = [t for t in event.turns if t.role == "user"]
        files[PROFILE] = self._profile(ws.read(PROFILE) or "", user_turns, event, date)
        names = ", ".join(p.name for p in people)
        entry = timeline.Entry(
            when=event.occurred_at,
            session_id=event.session_id,
            text=(
                f"{' and '.join(sorted({t.speaker for t in event.turns}))} ({len(event.turns)} "
                f"turns). People: {names or '-'}. Topics: "
                f"{', '.join(keywords((t.content for t in event.turns), 8)) or '-'}.\n"
                f"Transcript: {tpath}"
            ),
        )
        tl_path, tl_text = timeline.insert(ws, entry)
        files[tl_path] = tl_text
        files[INDEX] = index.render(entity_files)
        turns = f"{len(event.turns)} turn{'s' if len(event.turns) != 1 else ''}"
        return CommitPlan(
            files=files,
            message=f"Session {event.session_id} on {date}: {turns}"
            + (f" with {names}" if names else ""),
            writer=self.name,
        )

    def _person_file(self, old: str, person: _Person, event: SessionEnded, date: str) -> str:
        """Return the person's file with this session's line added under ``## Sessions``.

        Everything else in the file (front-matter fields and sections an LLM writer or a person
        wrote) is kept as it is; only the ``## Sessions`` section grows, and is condensed when the
        file passes :data:`ENTITY_MAX_BYTES`.
        """
        old_meta, body = frontmatter.split(old)
        cues = list(dict.fromkeys([*(old_meta.get("cues") or []), *person.cue_words]))[-12:]
        meta = {
            **old_meta,
            "name": old_meta.get("name") or person.name,
            "aliases": old_meta.get("aliases") or [],
            "type": old_meta.get("type") or "person",
            "cues": cues,
            "last_session": event.session_id,
            "last_date": date,
        }
        lines = split_lines(body)
        if not any(line.strip() for line in lines):
            lines = [f"# {meta['name']}", ""]
        start = next((i for i, line in enumerate(lines) if line.strip() == "## Sessions"), None)
        if start is None:
            before, section, after = lines, [], []
        else:
            end = next(
                (i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines)
            )
            before, section, after = lines[:start], lines[start + 1 : end], lines[end:]
        entries = [line for line in section if line.startswith("- ")]
        role = f"spoke {person.spoke} turns" if person.spoke else f"mentioned {person.mentions}x"
        about = ", ".join(person.cue_words) or "-"
        line = f"- {date} · {event.session_id} · {role} · about: {about}"
        if line not in entries:
            entries.append(line)
        head = "\n".join(before).rstrip("\n") + "\n\n## Sessions\n"
        tail = ("\n" + "\n".join(after).strip("\n") + "\n") if after else ""
        room = ENTITY_MAX_BYTES - len(frontmatter.render(meta, "").encode()) - len(tail.encode())
        return frontmatter.render(meta, _condense(head, entries, room, "sessions") + tail)

    def _profile(self, old: str, user_turns: list[Turn], event: SessionEnded, date: str) -> str:
        meta, body = frontmatter.split(old)
        name = meta.get("name") or (user_turns[0].speaker if user_turns else event.user_id)
        sessions = int(meta.get("sessions") or 0) + 1
        meta = {
            "name": name,
            "user_id": event.user_id,
            "type": "profile",
            "sessions": sessions,
            "first_date": min(str(meta.get("first_date") or date), date),
            "last_date": max(str(meta.get("last_date") or date), date),
        }
        entries = [line for line in split_lines(body) if line.startswith("- ")]
        said = 0
        for turn in user_turns:
            for sentence in _SENTENCE.split(turn.content.replace("\n", " ")):
                if said < 3 and _SELF.search(sentence) and 20 <= len(sentence) <= 240:
                    entries.append(f"- {date}: {sentence.strip()}")
                    said += 1
        condensed = [e for e in entries if e.startswith("- (")]
        dated = sorted((e for e in entries if not e.startswith("- (")), key=lambda e: e[2:12])
        entries = condensed + dated  # sessions may arrive out of date order
        head = f"# {name}\n\nThe user. What they said about themselves, oldest first.\n\n"
        room = PROFILE_MAX_BYTES - len(frontmatter.render(meta, "").encode())
        return frontmatter.render(meta, _condense(head, entries, room, "statements"))
