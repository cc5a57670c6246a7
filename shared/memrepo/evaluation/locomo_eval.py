"""The LoCoMo evaluation: memrepo against BM25, embeddings, recency and full context.

For each conversation the harness replays every session into a fresh store (``UserRepos`` on a
``FilesystemStore`` in a temporary directory, the deterministic writer), then asks each question
of categories 1-4 of every method at every budget and measures **evidence recall**: the share of
the question's evidence turns whose text (whitespace collapsed) is in the context. Recall is
averaged over questions, per category and overall; evidence ids that are malformed (``"D"``) or
name no turn are counted and reported, never fatal.

Methods (:data:`METHODS`):

* ``memrepo`` — the deterministic engine, ``Retriever(repos).context(...)``;
* ``memrepo-agent`` — the LLM retrieval agent, when one is wired in :mod:`memrepo.bootstrap` and an
  endpoint is configured (else reported "not run");
* ``bm25``, ``embeddings``, ``recency`` — :mod:`memrepo.evaluation.baselines`, same budgets, same
  tokenizer, same context format;
* ``full-context`` — every turn, whatever the budget (reported with its token count).

With a chat model (:class:`~memrepo.llm.base.ChatModel`) it also answers each question of
categories 1-5 from each method's context at ``answer_budget`` (and from the full context), has a
judge label the answers of categories 1-4 CORRECT/WRONG, and checks that adversarial questions
(category 5) get ``Not mentioned`` rather than an invented answer; tokens and latency are kept per
question.

Command: ``memrepo eval locomo PATH [--conversations conv-26,conv-30] [--budgets ...] [--out DIR]``
or ``python scripts/eval_locomo.py PATH ...``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

import memrepo
from memrepo import locomo, tokens
from memrepo.evaluation import baselines
from memrepo.evaluation.answers import (
    abstained,
    answer_messages,
    ask,
    judge_messages,
    parse_label,
)
from memrepo.llm.base import ChatModel
from memrepo.repos import UserRepos
from memrepo.retrieval.service import PlanningAgent, Retriever
from memrepo.store.filesystem import FilesystemStore
from memrepo.writer import DeterministicWriter, SessionWriter

log = logging.getLogger(__name__)

METHODS = ("memrepo", "memrepo-agent", "bm25", "embeddings", "recency", "full-context")
BUDGETED = ("memrepo", "memrepo-agent", "bm25", "embeddings", "recency")
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
RECALL_CATEGORIES = (1, 2, 3, 4)
DEFAULT_BUDGETS = (500, 1000, 2000, 4000)
USER_ID = "locomo-user"

Progress = Callable[[str], None]


@dataclass
class QuestionRecord:
    """One question and what every method did with it.

    Attributes:
        conversation: the sample id (``conv-26``).
        number: the question's position in the conversation's ``qa`` list.
        category: LoCoMo category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop,
            5 adversarial).
        question: the question text.
        gold: the gold answer (the adversarial answer for category 5).
        evidence: the valid evidence ids that name a turn of the conversation.
        unknown_evidence: well-formed ids that name no turn.
        malformed_evidence: evidence strings that hold no dialog id, or more than ids.
        found: per method, per budget (``"all"`` for full context): the evidence ids in context.
        tokens: per method, per budget: the context's tokens.
        latency_ms: per method, per budget: the time to build the context.
        answers: per method: the answer, the judge's label and what they cost.
    """

    conversation: str
    number: int
    category: int
    question: str
    gold: str
    evidence: list[str]
    unknown_evidence: list[str]
    malformed_evidence: list[str]
    found: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    latency_ms: dict[str, dict[str, float]] = field(default_factory=dict)
    answers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def recall(self, method: str, budget: str) -> float | None:
        """Return the share of evidence ``method`` found at ``budget`` (``None``: no evidence)."""
        if not self.evidence or budget not in self.found.get(method, {}):
            return None
        return len(self.found[method][budget]) / len(self.evidence)


@dataclass
class EvalConfig:
    """What to evaluate and how.

    Attributes:
        budgets: token budgets for every budgeted method.
        methods: the methods to run (a subset of :data:`METHODS`).
        chat: the answering model, or ``None`` to skip answers.
        judge: the judging model (default: ``chat``).
        answer_budget: the budget whose contexts are answered from.
        agent: the LLM retrieval agent for ``memrepo-agent``, or ``None``.
        agent_note: why ``memrepo-agent`` did not run, when ``agent`` is ``None``.
        cache_dir: where replayed stores are kept between runs (``None``: a temporary directory).
        limit: at most this many questions per conversation (0: all), for quick runs.
        workers: concurrent LLM requests.
        answer_max_tokens: completion tokens allowed for an answer.
    """

    budgets: tuple[int, ...] = DEFAULT_BUDGETS
    methods: tuple[str, ...] = METHODS
    chat: ChatModel | None = None
    judge: ChatModel | None = None
    answer_budget: int = 2000
    agent: PlanningAgent | None = None
    agent_note: str = "not run: no LLM endpoint configured"
    cache_dir: Path | None = None
    limit: int = 0
    workers: int = 4
    answer_max_tokens: int = 64
    model_names: dict[str, str] = field(default_factory=dict)


def _norm(text: str) -> str:
    return baselines.one_line(text)


def _writer_fingerprint() -> str:
    """Return a digest of the sources that decide what the deterministic writer writes."""
    root = Path(memrepo.__file__).parent
    skip = {"retrieval", "evaluation", "sandbox", "adapters", "devstack", "llm"}
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if rel.parts[0] in skip:
            continue
        digest.update(str(rel).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def replay(conv: locomo.Conversation, root: Path) -> UserRepos:
    """Write every session of ``conv`` into a filesystem store at ``root``; return its repos.

    A store already completed at ``root`` (marker file ``replayed``) is reused as is.
    """
    marker = root / "replayed"
    repos = UserRepos(FilesystemStore(root / "store"))
    if marker.exists():
        return repos
    writer = SessionWriter(repos, DeterministicWriter())
    for event in conv.events:
        writer.write(event)
    marker.write_text(f"{len(conv.events)} sessions\n", encoding="utf-8")
    return repos


def _records(conv: locomo.Conversation, limit: int) -> list[QuestionRecord]:
    records: list[QuestionRecord] = []
    for number, q in enumerate(conv.questions):
        if limit and len(records) >= limit:
            break
        present = [d for d in q.evidence if d in conv.turns and _norm(conv.turns[d])]
        unknown = [d for d in q.evidence if d not in present]
        records.append(
            QuestionRecord(
                conversation=conv.sample_id,
                number=number,
                category=q.category,
                question=q.question,
                gold=q.answer,
                evidence=present,
                unknown_evidence=unknown,
                malformed_evidence=list(q.malformed_evidence),
            )
        )
    return records


class _Contexts:
    """Builds each method's context for a question, recording evidence, tokens and latency."""

    def __init__(
        self,
        conv: locomo.Conversation,
        repos: UserRepos,
        rankers: dict[str, Any],
        config: EvalConfig,
    ) -> None:
        self.conv = conv
        self.docs = baselines.turn_docs(conv)
        self.retriever = Retriever(repos)
        self.agent_retriever = (
            Retriever(repos, agent=config.agent) if config.agent is not None else None
        )
        self.rankers = rankers
        self.full = baselines.full_context(self.docs)
        self.full_tokens = tokens.count(self.full)
        self.agent_meta: list[dict[str, Any]] = []

    def build(self, method: str, question: str, budget: int) -> tuple[str, float]:
        """Return ``(context, milliseconds)`` of ``method`` for ``question`` at ``budget``."""
        started = time.monotonic()
        if method == "memrepo":
            text = self.retriever.context(
                USER_ID, [{"role": "user", "content": question}], budget
            ).text
        elif method == "memrepo-agent":
            assert self.agent_retriever is not None
            result = self.agent_retriever.context(
                USER_ID, [{"role": "user", "content": question}], budget
            )
            self.agent_meta.append({"engine": result.engine, "fallback": result.fallback_reason})
            text = result.text
        elif method == "full-context":
            text = self.full
        else:
            ranker = self.rankers[method]
            text = baselines.fill(
                self.docs, ranker.rank(question), budget, contiguous=method == "recency"
            )
        return text, (time.monotonic() - started) * 1000


def _found(record: QuestionRecord, conv: locomo.Conversation, context: str) -> list[str]:
    flat = _norm(context)
    return [d for d in record.evidence if _norm(conv.turns[d]) in flat]


def _rankers(
    methods: Sequence[str], docs: list[baselines.TurnDoc], status: dict[str, str]
) -> dict[str, Any]:
    rankers: dict[str, Any] = {}
    makers: dict[str, Callable[[], Any]] = {
        "bm25": lambda: baselines.BM25Ranker(docs),
        "embeddings": lambda: baselines.DenseRanker(docs),
        "recency": lambda: baselines.RecencyRanker(docs),
    }
    for name, make in makers.items():
        if name not in methods or status.get(name, "ok") != "ok":
            continue
        try:
            rankers[name] = make()
        except ImportError as exc:
            status[name] = f"not run: {exc.name or exc} is not installed (pip install -e '.[eval]')"
    return rankers


def _answer_one(
    record: QuestionRecord,
    method: str,
    context: str,
    speakers: str,
    config: EvalConfig,
) -> None:
    assert config.chat is not None
    judge = config.judge or config.chat
    entry: dict[str, Any] = {"budget": config.answer_budget if method != "full-context" else "all"}
    try:
        reply = ask(
            config.chat,
            answer_messages(record.question, context, speakers),
            max_tokens=config.answer_max_tokens,
        )
        entry.update(
            answer=reply.text.strip(),
            prompt_tokens=reply.prompt_tokens,
            completion_tokens=reply.completion_tokens,
            latency_ms=round(reply.latency_ms, 1),
        )
        if record.category == 5:
            entry["abstained"] = abstained(reply.text)
            entry["correct"] = entry["abstained"]
        else:
            verdict = ask(
                judge,
                judge_messages(record.question, record.gold, reply.text.strip()),
                max_tokens=200,
            )
            entry["correct"] = parse_label(verdict.text)
            entry["judge_tokens"] = verdict.prompt_tokens + verdict.completion_tokens
            entry["judge_raw"] = verdict.text[:300]
    except Exception as exc:  # noqa: BLE001 - one failed request is recorded, not fatal
        entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
        entry["correct"] = None
    record.answers[method] = entry


def evaluate_conversation(
    item: dict[str, Any],
    config: EvalConfig,
    status: dict[str, str],
    work: Path,
    progress: Progress,
) -> tuple[list[QuestionRecord], dict[str, Any]]:
    """Replay one raw LoCoMo item and run every method on its questions.

    Returns:
        The question records and facts about the conversation (sessions, turns, full-context
        tokens, replay seconds).
    """
    conv = locomo.conversation(item, USER_ID)
    started = time.monotonic()
    if config.cache_dir is not None:
        key = hashlib.sha256(
            (json.dumps(item, sort_keys=True) + _writer_fingerprint()).encode()
        ).hexdigest()[:16]
        root = config.cache_dir / f"{conv.sample_id}-{key}"
    else:
        root = work / conv.sample_id
    root.mkdir(parents=True, exist_ok=True)
    repos = replay(conv, root)
    replay_s = time.monotonic() - started
    progress(f"{conv.sample_id}: {len(conv.events)} sessions replayed in {replay_s:.1f} s")
    docs = baselines.turn_docs(conv)
    rankers = _rankers(config.methods, docs, status)
    ctx = _Contexts(conv, repos, rankers, config)
    records = _records(conv, config.limit)
    for ranker in rankers.values():
        if hasattr(ranker, "prepare"):
            ranker.prepare([r.question for r in records])
    run = [m for m in config.methods if status.get(m, "ok") == "ok"]
    keep: dict[tuple[int, str], str] = {}
    for record in records:
        for method in run:
            budgets: Iterable[int | None] = config.budgets if method in BUDGETED else [None]
            if record.category == 5:
                if config.chat is None:
                    continue
                budgets = [config.answer_budget] if method in BUDGETED else [None]
            for budget in budgets:
                label = "all" if budget is None else str(budget)
                text, ms = ctx.build(method, record.question, budget or 0)
                record.found.setdefault(method, {})[label] = (
                    _found(record, conv, text) if record.category in RECALL_CATEGORIES else []
                )
                record.tokens.setdefault(method, {})[label] = (
                    ctx.full_tokens if budget is None else tokens.count(text)
                )
                record.latency_ms.setdefault(method, {})[label] = round(ms, 2)
                if budget in (None, config.answer_budget):
                    keep[(record.number, method)] = text
            if config.chat is not None and (record.number, method) not in keep:
                keep[(record.number, method)] = ctx.build(
                    method, record.question, config.answer_budget
                )[0]
    if config.chat is not None:
        other = (
            str(conv.events[0].metadata.get("other", "the other speaker")) if conv.events else ""
        )
        speakers = f"{conv.user_speaker} and {other}"
        jobs = [
            (record, method, keep[(record.number, method)])
            for record in records
            for method in run
            if (record.number, method) in keep
        ]
        progress(f"{conv.sample_id}: {len(jobs)} answers to ask and judge")
        with ThreadPoolExecutor(max_workers=max(1, config.workers)) as pool:
            list(pool.map(lambda job: _answer_one(job[0], job[1], job[2], speakers, config), jobs))
    facts = {
        "sessions": len(conv.events),
        "turns": len(docs),
        "full_context_tokens": ctx.full_tokens,
        "replay_s": round(replay_s, 2),
        "agent": _agent_summary(ctx.agent_meta),
    }
    progress(f"{conv.sample_id}: {len(records)} questions done")
    return records, facts


def _agent_summary(meta: list[dict[str, Any]]) -> dict[str, int]:
    engines: dict[str, int] = {}
    for m in meta:
        key = m["engine"] if not m["fallback"] else "fallback"
        engines[key] = engines.get(key, 0) + 1
    return engines


def evaluate(
    path: Path,
    conversations: Sequence[str] | None = None,
    config: EvalConfig | None = None,
    *,
    progress: Progress | None = None,
) -> tuple[dict[str, Any], list[QuestionRecord]]:
    """Run the evaluation on the LoCoMo file at ``path``; return ``(report, question records)``.

    Args:
        path: a LoCoMo JSON file (loaded by path, never copied).
        conversations: sample ids to evaluate (default: all of the file).
        config: what to run (default: every method, default budgets, no LLM).
        progress: called with one line per step.

    Raises:
        ValueError: a requested conversation is not in the file.
    """
    from memrepo.evaluation.report import summarise

    config = config or EvalConfig()
    say = progress or (lambda line: log.info(line))
    items = locomo.load(path)
    if conversations:
        by_id = {i.get("sample_id"): i for i in items}
        missing = [c for c in conversations if c not in by_id]
        if missing:
            raise ValueError(f"not in {path}: {', '.join(missing)}")
        items = [by_id[c] for c in conversations]
    status = {m: "ok" for m in config.methods}
    if "memrepo-agent" in status and config.agent is None:
        status["memrepo-agent"] = config.agent_note
    started = time.monotonic()
    records: list[QuestionRecord] = []
    facts: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memrepo-eval-") as tmp:
        for item in items:
            conv_records, conv_facts = evaluate_conversation(item, config, status, Path(tmp), say)
            records += conv_records
            facts[str(item["sample_id"])] = conv_facts
    report = summarise(
        records, facts, status, config, dataset=str(path), elapsed_s=time.monotonic() - started
    )
    return report, records


def write_outputs(
    report: dict[str, Any], records: list[QuestionRecord], out: Path
) -> dict[str, Path]:
    """Write the JSON report, the per-question JSONL, the markdown table and the PNG plot.

    Returns:
        The written files by kind: ``json``, ``questions``, ``markdown``, ``plot``.
    """
    from memrepo.evaluation.report import markdown, plot

    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out / "locomo-eval.json",
        "questions": out / "locomo-questions.jsonl",
        "markdown": out / "locomo-eval.md",
        "plot": out / "locomo-recall.png",
    }
    paths["json"].write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    with paths["questions"].open("w", encoding="utf-8") as handle:
        for record in records:
            handle.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")
    paths["markdown"].write_text(markdown(report), encoding="utf-8")
    try:
        plot(report, paths["plot"])
    except ImportError as exc:
        log.warning("no plot: %s is not installed (pip install -e '.[eval]')", exc.name)
        del paths["plot"]
    return paths


# -- command line ----------------------------------------------------------------------------

eval_app = typer.Typer(add_completion=False, no_args_is_help=True, help="Evaluate memory quality.")


def _csv(value: str | None) -> list[str]:
    return [v.strip() for v in (value or "").split(",") if v.strip()]


def llm_from_settings(
    environ: dict[str, str], answer_model: str | None, judge_model: str | None
) -> tuple[ChatModel | None, ChatModel | None, dict[str, str]]:
    """Return the answer and judge models from the environment's settings, or ``None``s.

    An endpoint counts as configured when :class:`~memrepo.settings.Settings` has an API key.
    Both are :class:`memrepo.llm.client.OpenAIChat` clients as the functions build them (base
    URL, key, timeout, retries from the settings), with temperature 0 for reproducible answers.
    """
    from memrepo.settings import Settings

    settings = Settings.from_env(environ)
    if settings.llm_api_key is None:
        return None, None, {}
    from memrepo.llm.client import OpenAIChat

    answer = answer_model or settings.retrieval_model
    judged = judge_model or answer
    chat = OpenAIChat.from_settings(settings, "retrieval", model=answer, temperature=0.0)
    judge = (
        chat
        if judged == answer
        else OpenAIChat.from_settings(settings, "retrieval", model=judged, temperature=0.0)
    )
    return chat, judge, {"answer": answer, "judge": judged, "base_url": settings.llm_base_url}


def agent_from_settings(environ: dict[str, str]) -> tuple[PlanningAgent | None, str]:
    """Return memrepo's LLM retrieval agent as :mod:`memrepo.bootstrap` wires it, or why not.

    The hook for issue 4: once ``bootstrap.retriever`` builds a retriever with an agent for
    settings with an API key, the ``memrepo-agent`` rows run with no change here.
    """
    from memrepo import bootstrap
    from memrepo.settings import Settings

    settings = Settings.from_env(environ)
    if settings.llm_api_key is None:
        return None, "not run: no LLM endpoint configured"
    agent = bootstrap.retriever(settings).agent
    if agent is None:
        return None, "not run: memrepo.bootstrap wires no retrieval agent yet"
    return agent, ""


@eval_app.command("locomo")
def locomo_command(
    path: Annotated[
        Path, typer.Argument(help="LoCoMo JSON file, e.g. ../shared/data/locomo/locomo-dev.json")
    ],
    conversations: Annotated[
        str, typer.Option(help="sample ids, e.g. conv-26,conv-30 (default: all)")
    ] = "",
    budgets: Annotated[
        str, typer.Option(help="token budgets, comma-separated")
    ] = "500,1000,2000,4000",
    out: Annotated[Path, typer.Option(help="output directory")] = Path("out/eval"),
    methods: Annotated[str, typer.Option(help=f"subset of {','.join(METHODS)}")] = "",
    answer_budget: Annotated[
        int, typer.Option(help="budget of the contexts answered by the LLM")
    ] = 2000,
    answer_model: Annotated[
        str, typer.Option(help="answering model (default: retrieval model)")
    ] = "",
    judge_model: Annotated[str, typer.Option(help="judge model (default: answering model)")] = "",
    cache: Annotated[
        Path | None, typer.Option(help="keep replayed stores here between runs")
    ] = None,
    limit: Annotated[int, typer.Option(help="questions per conversation, 0 for all")] = 0,
    workers: Annotated[int, typer.Option(help="concurrent LLM requests")] = 4,
) -> None:
    """Measure evidence recall (and, with an LLM endpoint, judged answers) on LoCoMo."""
    try:
        budget_list = tuple(sorted({int(b) for b in _csv(budgets)}))
    except ValueError:
        typer.secho(f"error: budgets must be integers: {budgets!r}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    wanted = tuple(_csv(methods)) or METHODS
    unknown = [m for m in wanted if m not in METHODS]
    if unknown or not budget_list or min(budget_list) < 1:
        typer.secho(
            f"error: unknown methods {unknown} or bad budgets", fg=typer.colors.RED, err=True
        )
        raise typer.Exit(2)
    environ = dict(os.environ)
    chat, judge, names = llm_from_settings(environ, answer_model or None, judge_model or None)
    agent, note = agent_from_settings(environ)
    config = EvalConfig(
        budgets=budget_list,
        methods=wanted,
        chat=chat,
        judge=judge,
        answer_budget=answer_budget,
        agent=agent,
        agent_note=note,
        cache_dir=cache,
        limit=limit,
        workers=workers,
        model_names=names,
    )
    try:
        report, records = evaluate(path, _csv(conversations), config, progress=typer.echo)
    except (ValueError, OSError) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(2) from None
    written = write_outputs(report, records, out)
    typer.echo(written["markdown"].read_text(encoding="utf-8"))
    for kind, where in written.items():
        typer.echo(f"{kind}: {where}")
