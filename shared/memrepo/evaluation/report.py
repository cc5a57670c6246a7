"""Figures of a LoCoMo evaluation: the summary (JSON), a markdown table and a recall plot (PNG).

Recall is the mean over questions of the share of their evidence turns found in the context
(questions without a usable evidence id are left out and counted). ``turn_recall`` is the same
pooled over evidence turns (the figure ``tests/test_locomo_recall.py`` asserts). Accuracy is the
share of answers the judge labelled CORRECT (an unparsable verdict or a failed request counts as
not correct and is counted apart); for category 5 it is the share of answers that abstained.
"""

from __future__ import annotations

from collections import defaultdict
from statistics import mean
from typing import TYPE_CHECKING, Any

from memrepo.tokens import ENCODING

if TYPE_CHECKING:
    from pathlib import Path

    from memrepo.evaluation.locomo_eval import EvalConfig, QuestionRecord

CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}


def _r(value: float) -> float:
    return round(value, 4)


def _recall_table(records: list[QuestionRecord], method: str, label: str) -> dict[str, Any] | None:
    per: dict[str, list[float]] = defaultdict(list)
    found = total = 0
    for record in records:
        value = record.recall(method, label)
        if value is None:
            continue
        per[str(record.category)].append(value)
        per["overall"].append(value)
        found += len(record.found[method][label])
        total += len(record.evidence)
    if not per:
        return None
    table: dict[str, Any] = {k: _r(mean(v)) for k, v in sorted(per.items())}
    table["questions"] = len(per["overall"])
    table["turn_recall"] = _r(found / total) if total else None
    return table


def _answers(records: list[QuestionRecord], methods: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for method in methods:
        rows = [(r, r.answers[method]) for r in records if method in r.answers]
        if not rows:
            continue
        per: dict[str, list[float]] = defaultdict(list)
        abstain: list[float] = []
        for record, entry in rows:
            ok = 1.0 if entry.get("correct") else 0.0
            if record.category == 5:
                abstain.append(ok)
            else:
                per[str(record.category)].append(ok)
                per["overall"].append(ok)
        answered = [e for _, e in rows if "error" not in e]
        out[method] = {
            "accuracy": {k: _r(mean(v)) for k, v in sorted(per.items())},
            "adversarial_abstained": _r(mean(abstain)) if abstain else None,
            "questions": len(rows),
            "errors": len(rows) - len(answered),
            "unjudged": sum(1 for r, e in rows if r.category != 5 and e.get("correct") is None),
            "prompt_tokens_mean": _r(mean(e["prompt_tokens"] for e in answered))
            if answered
            else None,
            "completion_tokens_mean": _r(mean(e["completion_tokens"] for e in answered))
            if answered
            else None,
            "latency_ms_mean": _r(mean(e["latency_ms"] for e in answered)) if answered else None,
            "budget": rows[0][1].get("budget"),
        }
    return out


def summarise(
    records: list[QuestionRecord],
    facts: dict[str, Any],
    status: dict[str, str],
    config: EvalConfig,
    *,
    dataset: str,
    elapsed_s: float,
) -> dict[str, Any]:
    """Return the JSON-ready summary of an evaluation (see the module docstring)."""
    labels = [str(b) for b in config.budgets]
    methods: dict[str, Any] = {}
    for method in config.methods:
        entry: dict[str, Any] = {"status": status.get(method, "ok")}
        if entry["status"] == "ok":
            own = ["all"] if method == "full-context" else labels
            entry["recall"] = {lab: _recall_table(records, method, lab) for lab in own}
            scored = [r for r in records if r.category != 5]
            entry["tokens_mean"] = {
                lab: _r(
                    mean(r.tokens[method][lab] for r in scored if lab in r.tokens.get(method, {}))
                )
                for lab in own
                if any(lab in r.tokens.get(method, {}) for r in scored)
            }
            entry["latency_ms_mean"] = {
                lab: _r(
                    mean(
                        r.latency_ms[method][lab]
                        for r in scored
                        if lab in r.latency_ms.get(method, {})
                    )
                )
                for lab in own
                if any(lab in r.latency_ms.get(method, {}) for r in scored)
            }
        methods[method] = entry
    questions: dict[str, int] = defaultdict(int)
    for record in records:
        questions[str(record.category)] += 1
    recall_records = [r for r in records if r.category in (1, 2, 3, 4)]
    malformed = [m for r in recall_records for m in r.malformed_evidence]
    report: dict[str, Any] = {
        "dataset": dataset,
        "conversations": facts,
        "budgets": list(config.budgets),
        "tokenizer": ENCODING,
        "categories": {str(k): v for k, v in CATEGORY_NAMES.items()},
        "questions": dict(sorted(questions.items())),
        "evidence": {
            "turns": sum(len(r.evidence) for r in recall_records),
            "malformed": len(malformed),
            "malformed_examples": sorted(set(malformed))[:10],
            "unknown_ids": sum(len(r.unknown_evidence) for r in recall_records),
            "questions_without_evidence": sum(1 for r in recall_records if not r.evidence),
        },
        "methods": methods,
        "answers": (
            {
                "status": "ok",
                "budget": config.answer_budget,
                "models": config.model_names,
                "methods": _answers(records, [m for m in config.methods if status.get(m) == "ok"]),
            }
            if config.chat is not None
            else {"status": "not run: no LLM endpoint configured"}
        ),
        "elapsed_s": round(elapsed_s, 1),
    }
    return report


def _fmt(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def markdown(report: dict[str, Any]) -> str:
    """Return the report as markdown: recall by budget, recall by category, answers."""
    budgets = [str(b) for b in report["budgets"]]
    convs = report["conversations"]
    ev = report["evidence"]
    q = report["questions"]
    full_tokens = [c["full_context_tokens"] for c in convs.values()]
    lines = [
        "# LoCoMo evaluation",
        "",
        f"Dataset `{report['dataset']}`: {len(convs)} conversations ({', '.join(convs)}), "
        f"{sum(c['sessions'] for c in convs.values())} sessions, "
        f"{sum(c['turns'] for c in convs.values())} turns. Questions by category: "
        + ", ".join(f"{CATEGORY_NAMES[int(k)]} {v}" for k, v in q.items())
        + f". Tokenizer `{report['tokenizer']}`.",
        "",
        f"Evidence of categories 1-4: {ev['turns']} turns; {ev['malformed']} malformed evidence "
        f"strings ({', '.join(repr(m) for m in ev['malformed_examples']) or 'none'}), "
        f"{ev['unknown_ids']} ids naming no turn, {ev['questions_without_evidence']} questions "
        "left without usable evidence (not scored).",
        "",
        "## Evidence recall by budget (categories 1-4, mean over questions)",
        "",
        "| method | "
        + " | ".join(f"{b} tokens" for b in budgets)
        + " | tokens used / ms per question"
        + (f" at {budgets[len(budgets) // 2]}" if budgets else "")
        + " |",
        "|---|" + "---:|" * len(budgets) + "---:|",
    ]
    mid = budgets[len(budgets) // 2] if budgets else ""
    for name, entry in report["methods"].items():
        if entry["status"] != "ok":
            lines.append(
                f"| {name} | " + " | ".join(["not run"] * len(budgets)) + f" | {entry['status']} |"
            )
            continue
        if name == "full-context":
            table = entry["recall"]["all"]
            value = _fmt(table["overall"]) if table else "–"
            lines.append(
                "| full context (every turn, ignores the budget) | "
                + " | ".join([value] * len(budgets))
                + f" | {mean(full_tokens):,.0f} tokens (max {max(full_tokens):,}) |"
            )
            continue
        cells = [_fmt((entry["recall"].get(b) or {}).get("overall")) for b in budgets]
        tok = entry["tokens_mean"].get(mid)
        ms = entry["latency_ms_mean"].get(mid)
        lines.append(
            f"| {name} | " + " | ".join(cells) + f" | {tok:,.0f} / {ms:,.0f} ms |"
            if tok is not None and ms is not None
            else f"| {name} | " + " | ".join(cells) + " | – |"
        )
    lines += [
        "",
        "## Evidence recall by category",
        "",
        "| method | budget | "
        + " | ".join(CATEGORY_NAMES[c] for c in (1, 2, 3, 4))
        + " | overall | pooled over turns |",
        "|---|---:|" + "---:|" * 6,
    ]
    for name, entry in report["methods"].items():
        if entry["status"] != "ok":
            continue
        for label, table in entry["recall"].items():
            if not table:
                continue
            lines.append(
                f"| {name} | {label} | "
                + " | ".join(_fmt(table.get(str(c))) for c in (1, 2, 3, 4))
                + f" | {_fmt(table['overall'])} | {_fmt(table['turn_recall'])} |"
            )
    answers = report["answers"]
    lines += ["", "## Answers judged by an LLM (CORRECT/WRONG)", ""]
    if answers["status"] != "ok":
        lines.append(f"{answers['status']}: every LLM row is not run.")
    else:
        models = answers.get("models") or {}
        lines += [
            f"Contexts at {answers['budget']} tokens (full context: every turn). Answer model "
            f"`{models.get('answer', '?')}`, judge `{models.get('judge', '?')}`. Adversarial: "
            "share of category-5 questions answered `Not mentioned`.",
            "",
            "| method | "
            + " | ".join(CATEGORY_NAMES[c] for c in (1, 2, 3, 4))
            + " | overall | adversarial abstained | prompt tokens | ms per answer | errors |",
            "|---|" + "---:|" * 9,
        ]
        for name, entry in answers["methods"].items():
            acc = entry["accuracy"]
            lines.append(
                f"| {name} | "
                + " | ".join(_fmt(acc.get(str(c))) for c in (1, 2, 3, 4))
                + f" | {_fmt(acc.get('overall'))} | {_fmt(entry['adversarial_abstained'])} | "
                f"{entry['prompt_tokens_mean'] or 0:,.0f} | {entry['latency_ms_mean'] or 0:,.0f} | "
                f"{entry['errors']} |"
            )
        for name, entry in report["methods"].items():
            if entry["status"] != "ok":
                lines.append(f"| {name} | " + " | ".join(["not run"] * 5) + " | – | – | – | – |")
    lines += ["", f"Run time {report['elapsed_s']:,.0f} s.", ""]
    return "\n".join(lines)


def plot(report: dict[str, Any], path: Path) -> None:
    """Draw recall against budget, one line per method (full context as a dashed level).

    Raises:
        ImportError: matplotlib is not installed.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    budgets = report["budgets"]
    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    skipped = []
    for name, entry in report["methods"].items():
        if entry["status"] != "ok":
            skipped.append(name)
            continue
        if name == "full-context":
            table = entry["recall"]["all"]
            if table:
                tok = mean(c["full_context_tokens"] for c in report["conversations"].values())
                ax.axhline(
                    table["overall"],
                    linestyle="--",
                    color="grey",
                    label=f"full context (~{tok:,.0f} tokens)",
                )
            continue
        xs = [b for b in budgets if (entry["recall"].get(str(b)) or {}).get("overall") is not None]
        ys = [entry["recall"][str(b)]["overall"] for b in xs]
        ax.plot(xs, ys, marker="o", linewidth=2 if name == "memrepo" else 1.3, label=name)
    ax.set_xscale("log", base=2)
    ax.set_xticks(budgets)
    ax.set_xticklabels([str(b) for b in budgets])
    ax.set_ylim(0, 1.02)
    ax.set_xlabel(f"context budget (tokens, {report['tokenizer']})")
    ax.set_ylabel("evidence recall (categories 1-4)")
    convs = len(report["conversations"])
    ax.set_title(f"LoCoMo: evidence recall vs budget ({convs} conversations)")
    ax.grid(True, alpha=0.3)
    if skipped:
        ax.text(
            0.99,
            0.02,
            "not run: " + ", ".join(skipped),
            transform=ax.transAxes,
            ha="right",
            va="bottom",
            fontsize=8,
            color="grey",
        )
    ax.legend(loc="lower right", bbox_to_anchor=(1.0, 0.07), fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
