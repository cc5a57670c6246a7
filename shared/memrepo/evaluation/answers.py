"""Answering from a context and judging the answer, in the style of published LoCoMo evaluations.

The answer prompt follows the mem0 paper's (arXiv:2504.19413): short answers, timestamps used to
turn relative dates into absolute ones, and — so adversarial questions (category 5) can be checked
— the fixed reply ``Not mentioned`` when the context does not hold the answer. The judge follows
the same paper's LLM-as-a-judge: generous on wording and date formats, one label, ``CORRECT`` or
``WRONG``, returned as JSON ``{"label": ...}``.

The model is the project's chat-model port, :class:`memrepo.llm.base.ChatModel` (in production
:class:`memrepo.llm.client.OpenAIChat`, with its bounded retries); :func:`ask` sends one prompt and
flattens the answer into a :class:`Completion`, the text with what it cost.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

    from memrepo.llm.base import ChatModel, ChatResult

ABSTAIN = "Not mentioned"

ANSWER_SYSTEM = (
    "You are a memory assistant answering questions about a long conversation between two people "
    "from excerpts of it."
)

ANSWER_PROMPT = """# CONTEXT
Excerpts of the conversation between {speakers}, with the date each was said:

{context}

# INSTRUCTIONS
1. Use only the excerpts above; read both speakers' words.
2. Mind the dates: when a question is about time, turn relative references ("last year", "two
   weeks ago", "yesterday") into absolute dates from the date the words were said (said on
   2023-05-04, "last year" means 2022).
3. When excerpts disagree, the most recent one wins.
4. Do not mix up the people named in the excerpts with the two speakers.
5. Answer in at most 6 words, without explanation.
6. If the excerpts do not contain the answer, reply exactly: {abstain}

# QUESTION
{question}

Answer:"""

JUDGE_PROMPT = """Your task is to label an answer to a question as CORRECT or WRONG. You are given
(1) a question (asked about things two people said to each other in earlier conversations),
(2) a gold (ground truth) answer, and (3) a generated answer.

The gold answer is usually short and names the topic, for example:
Question: What did I buy the last time I was in Hawaii?
Gold answer: A shell necklace
The generated answer may be much longer; be generous: as long as it refers to the same thing as
the gold answer, it is CORRECT.

For questions about time the gold answer is a date, month or year. The generated answer may use
another format ("7 May" for "May 7th") or a relative reference; as long as it refers to the same
date or period as the gold answer, it is CORRECT.

Question: {question}
Gold answer: {gold}
Generated answer: {generated}

First give a one-sentence reason, then the label. Never write both labels. Reply with JSON only:
{{"reason": "...", "label": "CORRECT" or "WRONG"}}"""

_ABSTAIN = re.compile(
    r"not mentioned|no (?:information|mention|evidence|record)|not (?:stated|specified|said|known"
    r"|provided|available|in the excerpts)|unknown|cannot (?:be )?(?:determined|answer)|"
    r"can't (?:be )?(?:determined|answer)|(?:doesn't|does not|do not|don't) (?:say|know|mention)",
    re.IGNORECASE,
)
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b")


@dataclass(frozen=True)
class Completion:
    """One answer of a model with what it cost.

    Attributes:
        text: the assistant message content (``""`` when none).
        prompt_tokens: prompt tokens as reported by the endpoint (0 when it reports none).
        completion_tokens: completion tokens as reported by the endpoint.
        latency_ms: wall time of the request, in milliseconds.
        model: the model that answered.
    """

    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_ms: float
    model: str


def ask(
    model: ChatModel, messages: Sequence[Mapping[str, Any]], *, max_tokens: int = 256
) -> Completion:
    """Return ``model``'s answer to ``messages`` with its tokens and wall time.

    Args:
        model: the chat model (answering or judging).
        messages: OpenAI-style chat messages.
        max_tokens: completion tokens allowed.

    Returns:
        The answer text (``""`` when none), the tokens the endpoint reported over every request
        of the call (retries included), the call's wall time in milliseconds (backoffs included)
        and the model that answered.

    Raises:
        LLMError: the model failed (see :meth:`memrepo.llm.base.ChatModel.chat`).
    """
    started = time.monotonic()
    result: ChatResult[BaseModel] = model.chat(messages, max_tokens=max_tokens)
    return Completion(
        text=result.content or "",
        prompt_tokens=result.usage.prompt_tokens,
        completion_tokens=result.usage.completion_tokens,
        latency_ms=(time.monotonic() - started) * 1000,
        model=result.model,
    )


def answer_messages(question: str, context: str, speakers: str) -> list[dict[str, str]]:
    """Return the messages asking for a short answer to ``question`` from ``context``."""
    prompt = ANSWER_PROMPT.format(
        speakers=speakers,
        context=context.strip() or "(nothing)",
        question=question,
        abstain=ABSTAIN,
    )
    return [{"role": "system", "content": ANSWER_SYSTEM}, {"role": "user", "content": prompt}]


def judge_messages(question: str, gold: str, generated: str) -> list[dict[str, str]]:
    """Return the messages asking the judge to label ``generated`` against ``gold``."""
    prompt = JUDGE_PROMPT.format(question=question, gold=gold, generated=generated)
    return [{"role": "user", "content": prompt}]


def parse_label(text: str) -> bool | None:
    """Return ``True`` for CORRECT, ``False`` for WRONG, ``None`` when the judge said neither.

    Reads ``{"label": ...}`` JSON first (also inside a code fence or after a reason), then a lone
    label word anywhere in the text; a reply holding both labels and no JSON is ``None``.
    """
    for candidate in re.findall(r"\{[^{}]*\}", text):
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict) and str(value.get("label", "")).upper() in ("CORRECT", "WRONG"):
            return str(value["label"]).upper() == "CORRECT"
    found = set(_LABEL.findall(text.upper()))
    if len(found) == 1:
        return found == {"CORRECT"}
    return None


def abstained(answer: str) -> bool:
    """Return whether ``answer`` declines to answer (``Not mentioned`` and its paraphrases)."""
    return bool(_ABSTAIN.search(answer))
