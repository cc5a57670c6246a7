"""Reading LoCoMo conversations (snap-research/LoCoMo ``locomo10.json`` format) as events.

Each ``session_<N>`` becomes one :class:`SessionEnded`, dated by ``session_<N>_date_time``
(``"1:56 pm on 8 May, 2023"``, format ``%I:%M %p on %d %B, %Y``, taken as UTC), with
``speaker_a`` as the memory's user (role ``user``) and ``speaker_b`` as ``other``. A turn's
``dia_id`` (``D1:3``) becomes its ``turn_id``; an image's ``blip_caption`` is appended to the text
as ``[shares an image: ...]``. Questions keep their evidence ids; malformed ones (``"D"``,
``"D8:6; D9:17"``) are split or reported by :func:`evidence_ids`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memrepo.events import SessionEnded, parse_session_ended

_DIA = re.compile(r"D\d+:\d+")


@dataclass(frozen=True)
class Question:
    """One LoCoMo question with its evidence turn ids."""

    question: str
    answer: str
    category: int
    evidence: tuple[str, ...]
    malformed_evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """One LoCoMo conversation: its sessions as events, its turns by id, its questions."""

    sample_id: str
    user_speaker: str
    events: tuple[SessionEnded, ...]
    turns: dict[str, str]
    questions: tuple[Question, ...]


def load(path: Path) -> list[dict[str, Any]]:
    """Return the raw LoCoMo items of a JSON file."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected a JSON list of conversations")
    return data


def evidence_ids(raw: list[Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return ``(valid ids, malformed strings)`` of a question's evidence list."""
    good: list[str] = []
    bad: list[str] = []
    for item in raw:
        found = _DIA.findall(str(item))
        good += found
        if not found or _DIA.sub("", str(item)).strip(" ;,"):
            bad.append(str(item))
    return tuple(dict.fromkeys(good)), tuple(bad)


def conversation(
    item: dict[str, Any], user_id: str, *, now: datetime | None = None
) -> Conversation:
    """Turn one raw LoCoMo item into events for ``user_id`` and its questions.

    Raises:
        ValueError: the item is not a LoCoMo conversation (a key is missing or of the wrong type).
        InvalidEvent: a session fails event validation.
    """
    try:
        return _conversation(item, user_id, now=now)
    except (KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"not a LoCoMo conversation: {type(exc).__name__}: {exc}") from exc


def _conversation(item: dict[str, Any], user_id: str, *, now: datetime | None) -> Conversation:
    conv = item["conversation"]
    user, other = conv["speaker_a"], conv["speaker_b"]
    numbers = sorted(
        int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k) and conv[k]
    )
    events = []
    turns: dict[str, str] = {}
    for n in numbers:
        when = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        event_turns = []
        for t in conv[f"session_{n}"]:
            text = t.get("text", "")
            if t.get("blip_caption"):
                text = f"{text} [shares an image: {t['blip_caption']}]"
            turns[t["dia_id"]] = t.get("text", "")
            event_turns.append(
                {
                    "speaker": t["speaker"],
                    "role": "user" if t["speaker"] == user else "other",
                    "content": text,
                    "turn_id": t["dia_id"],
                }
            )
        events.append(
            parse_session_ended(
                {
                    "user_id": user_id,
                    "session_id": f"{item['sample_id']}-session_{n}",
                    "occurred_at": when.replace(tzinfo=UTC).isoformat(),
                    "turns": event_turns,
                    "metadata": {
                        "source": "locomo",
                        "sample_id": item["sample_id"],
                        "other": other,
                    },
                },
                now=now,
            )
        )
    questions = []
    for qa in item.get("qa", []):
        good, bad = evidence_ids(qa.get("evidence", []))
        questions.append(
            Question(
                question=qa["question"],
                answer=str(qa.get("answer", qa.get("adversarial_answer", ""))),
                category=int(qa["category"]),
                evidence=good,
                malformed_evidence=bad,
            )
        )
    return Conversation(item["sample_id"], user, tuple(events), turns, tuple(questions))
