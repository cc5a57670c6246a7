"""The LoCoMo evaluation harness end to end on a tiny conversation written for this test.

``tests/data/locomo-mini.json`` (written by the project, not LoCoMo's text): Nora (the user) and
Ivo, three sessions of four turns, five scored questions and one adversarial question; question 5
carries a malformed evidence id ``"D"``. Expected figures, worked out from the transcript:

Recency at 150 tokens (``fill(..., contiguous=True)``): the whole conversation renders to 215
tokens; session 1 (header + 4 lines, 73 tokens) is what does not fit, so the window is exactly
sessions 2 and 3. Q1 (D1:1) 0, Q2 (D2:1) 1, Q3 (D1:4, D3:4) 1/2, Q4 (D2:3) 1, Q5 (D3:3) 1 →
mean (0 + 1 + 0.5 + 1 + 1) / 5 = 0.7; pooled 4/6 turns.

BM25 (any budget ≥ 70: each context is one or two lines): Q1 "name Nora greyhound" ranks D1:1
first; Q2 "Ivo run Lisbon half marathon" D2:1; Q3 "instrument Tomas play first recital" matches
D3:4 (Tomas, first, recital) and D1:4 (Tomas); Q4 "Ivo's time half marathon" — ``time`` is a
stopword, so only D2:1 matches, not the answer D2:3; Q5 "Nora make pottery classes" — ``make`` is
a stopword, D3:1 matches, not D3:3. → (1 + 1 + 1 + 0 + 0) / 5 = 0.6.

memrepo at 300 tokens: profile.md head (80 tokens, always loaded) plus the best lines with the
reply that follows. Q1 D1:1 and Q2 D2:1 are the best lines of their questions: found. Q3: D3:4
(Tomas, first, recital) comes first; D1:4 (Tomas only) does not fit after the profile, Tomas's
entity file and D3:4's block: 1/2. Q4 and Q5: the answer turn is two turns after the matching one
(D2:1 → D2:3, D3:1 → D3:3) and holds no query word, so the one-reply window misses it: 0.
→ (1 + 1 + 0.5 + 0 + 0) / 5 = 0.5; pooled 3/6. At 150 tokens only Q2's line fits after the
profile: 0.2.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from memrepo import locomo, tokens
from memrepo.evaluation import baselines
from memrepo.evaluation.answers import abstained, parse_label
from memrepo.evaluation.locomo_eval import USER_ID, EvalConfig, evaluate, write_outputs
from scripted_openai import Callable, Status
from typer.testing import CliRunner

MINI = Path(__file__).parent / "data" / "locomo-mini.json"


def _overall(report, method, budget):
    return report["methods"][method]["recall"][str(budget)]


@pytest.fixture(scope="module")
def run():
    config = EvalConfig(budgets=(150, 300), methods=("memrepo", "recency", "full-context"))
    return evaluate(MINI, config=config)


def test_recency_window_is_sessions_two_and_three():
    conv = locomo.conversation(locomo.load(MINI)[0], USER_ID)
    docs = baselines.turn_docs(conv)
    assert tokens.count(baselines.full_context(docs)) == 215
    assert (
        tokens.count(baselines.render(docs[4:])) <= 150 < tokens.count(baselines.render(docs[3:]))
    )
    assert baselines.fill(docs, baselines.RecencyRanker(docs).rank("x"), 150, contiguous=True) == (
        baselines.render(docs[4:])
    )


def test_recall_figures_match_the_hand_computed_ones(run):
    report, records = run
    recency = _overall(report, "recency", 150)
    assert recency["overall"] == 0.7
    assert recency["turn_recall"] == round(4 / 6, 4)
    assert {k: recency[k] for k in "1234"} == {"1": 0.5, "2": 1.0, "3": 1.0, "4": 0.5}
    assert _overall(report, "memrepo", 300)["overall"] == 0.5
    assert _overall(report, "memrepo", 300)["turn_recall"] == 0.5
    assert _overall(report, "memrepo", 150)["overall"] == 0.2
    assert report["methods"]["full-context"]["recall"]["all"]["overall"] == 1.0
    assert report["conversations"]["mini-1"]["full_context_tokens"] == 215
    by_question = {r.number: r for r in records}
    assert by_question[2].found["memrepo"]["300"] == ["D3:4"]
    for method in ("memrepo", "recency"):
        for budget in ("150", "300"):
            assert all(r.tokens[method][budget] <= int(budget) for r in records if r.category != 5)


def test_malformed_evidence_is_counted_not_fatal(run):
    report, records = run
    assert report["evidence"] == {
        "turns": 6,
        "malformed": 1,
        "malformed_examples": ["D"],
        "unknown_ids": 0,
        "questions_without_evidence": 0,
    }
    assert report["questions"] == {"1": 1, "2": 1, "3": 1, "4": 2, "5": 1}
    adversarial = next(r for r in records if r.category == 5)
    assert adversarial.found == {}  # not scored for recall, and no LLM to ask
    assert (
        report["methods"]["memrepo-agent"]["status"].startswith("not run")
        if ("memrepo-agent" in report["methods"])
        else True
    )


def test_bm25_recall():
    pytest.importorskip("rank_bm25")
    report, _ = evaluate(MINI, config=EvalConfig(budgets=(300,), methods=("bm25",)))
    assert _overall(report, "bm25", 300)["overall"] == 0.6
    assert _overall(report, "bm25", 300)["turn_recall"] == round(4 / 6, 4)


def test_missing_baseline_packages_mark_rows_not_run(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_bm25(name, *args, **kwargs):
        if name == "rank_bm25":
            raise ImportError("no", name="rank_bm25")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_bm25)
    report, _ = evaluate(MINI, config=EvalConfig(budgets=(300,), methods=("bm25", "recency")))
    assert report["methods"]["bm25"]["status"].startswith("not run: rank_bm25")
    assert report["methods"]["recency"]["recall"]["300"]["overall"] == 1.0


def _scripted(request):
    prompt = request["messages"][-1]["content"]
    if "Gold answer:" in prompt:
        gold = prompt.rsplit("Gold answer: ", 1)[1].split("\n", 1)[0]
        generated = prompt.rsplit("Generated answer: ", 1)[1].split("\n", 1)[0]
        label = "CORRECT" if generated and generated.lower() in gold.lower() else "WRONG"
        return json.dumps({"reason": "compared", "label": label})
    question = prompt.rsplit("# QUESTION\n", 1)[1].split("\n", 1)[0]
    context = prompt.split("# INSTRUCTIONS", 1)[0]
    known = {"greyhound": "Biscuit", "Lisbon": "weekend before 20 April", "recital": "Cello"}
    for word, answer in known.items():
        if word in question and "Ivo's greyhound" not in question and word in context:
            return answer
    return "Not mentioned"


def test_answers_and_judge_with_a_scripted_endpoint(scripted_openai, tmp_path):
    from memrepo.llm.client import OpenAIChat

    scripted_openai.default = Callable(_scripted)
    chat = OpenAIChat(
        base_url=scripted_openai.base_url, model="scripted-model", api_key="test-key", max_retries=0
    )
    config = EvalConfig(
        budgets=(300,),
        methods=("memrepo", "recency", "full-context"),
        chat=chat,
        answer_budget=300,
        workers=2,
        model_names={"answer": "scripted-model", "judge": "scripted-model"},
    )
    report, records = evaluate(MINI, config=config)
    chat.close()
    answers = report["answers"]
    assert answers["status"] == "ok"
    # 6 questions x 3 methods answered; the 5 scored ones judged too.
    assert scripted_openai.calls == 6 * 3 + 5 * 3
    for method in ("memrepo", "recency", "full-context"):
        entry = answers["methods"][method]
        # Q1 Biscuit, Q2 the weekend, Q3 Cello are right; Q4 and Q5 get "Not mentioned": WRONG.
        assert entry["accuracy"]["overall"] == 0.6
        assert entry["adversarial_abstained"] == 1.0
        assert entry["errors"] == 0 and entry["prompt_tokens_mean"] > 0
        assert entry["latency_ms_mean"] >= 0
    first = next(r for r in records if r.number == 0)
    assert first.answers["memrepo"]["answer"] == "Biscuit" and first.answers["memrepo"]["correct"]
    paths = write_outputs(report, records, tmp_path)
    assert "| memrepo |" in paths["markdown"].read_text()
    assert json.loads(paths["json"].read_text())["answers"]["methods"]["recency"]["questions"] == 6


def _eval_locomo_cli(*options: str) -> None:
    """Run ``memrepo eval locomo MINI OPTIONS...`` and check that it succeeded."""
    from memrepo.cli import app

    result = CliRunner().invoke(app, ["eval", "locomo", str(MINI), *options])
    assert result.exit_code == 0, result.output


def test_cli_writes_table_json_and_questions(tmp_path, monkeypatch):
    for var in ("OPENROUTER_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    _eval_locomo_cli(
        "--budgets", "150,300", "--methods", "memrepo,memrepo-agent,recency", "--out", str(tmp_path)
    )
    report = json.loads((tmp_path / "locomo-eval.json").read_text())
    assert report["methods"]["memrepo-agent"]["status"] == "not run: no LLM endpoint configured"
    assert report["answers"]["status"].startswith("not run")
    table = (tmp_path / "locomo-eval.md").read_text()
    assert "| recency | 0.700 | 1.000 |" in table
    assert "| memrepo-agent | not run | not run |" in table
    assert len((tmp_path / "locomo-questions.jsonl").read_text().splitlines()) == 6


def test_cli_answers_and_judges_through_the_project_llm_client(
    scripted_openai, tmp_path, monkeypatch
):
    """The command line builds memrepo.llm.client from the settings: named models, temperature 0,
    a 429 retried instead of costing an answer."""
    monkeypatch.delenv("OPENROUTER_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("MEMREPO_LLM_BASE_URL", scripted_openai.base_url)
    monkeypatch.setenv("MEMREPO_LLM_MAX_RETRIES", "1")
    monkeypatch.setenv("MEMREPO_STORE", f"file://{tmp_path / 'store'}")
    scripted_openai.script(Status(429, headers={"retry-after": "0"}))
    scripted_openai.default = Callable(_scripted)
    options = "--budgets 300 --methods memrepo,recency --answer-budget 300 --workers 1"
    options += " --answer-model answer-model --judge-model judge-model"
    _eval_locomo_cli(*options.split(), "--out", str(tmp_path / "out"))
    answers = json.loads((tmp_path / "out" / "locomo-eval.json").read_text())["answers"]
    assert answers["status"] == "ok"
    assert answers["models"]["answer"] == "answer-model"
    assert answers["models"]["judge"] == "judge-model"
    for method in ("memrepo", "recency"):
        assert answers["methods"][method]["errors"] == 0
        assert answers["methods"][method]["accuracy"]["overall"] == 0.6
    requests = scripted_openai.requests
    # 6 questions x 2 methods answered, the 5 scored ones judged, and the one 429 sent again.
    assert len(requests) == 6 * 2 + 5 * 2 + 1
    assert requests[0] == requests[1]  # the retry of the request refused with 429
    assert all(r["temperature"] == 0 for r in requests)
    judged = ["Gold answer:" in r["messages"][-1]["content"] for r in requests]
    assert [r["model"] for r in requests] == [
        "judge-model" if j else "answer-model" for j in judged
    ]
    assert sum(judged) == 5 * 2


def test_judge_labels_and_abstentions():
    assert parse_label('{"reason": "same dog", "label": "CORRECT"}') is True
    assert parse_label('reason first\n```json\n{"label": "WRONG"}\n```') is False
    assert parse_label("The answer is CORRECT") is True
    assert parse_label("CORRECT or WRONG?") is None
    assert abstained("Not mentioned") and abstained("The excerpts do not say.")
    assert not abstained("Biscuit")
