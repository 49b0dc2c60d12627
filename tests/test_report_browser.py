"""``userturn report`` end to end, looked at in a real headless Chromium.

1. A tiny real run (embedded SmolLM2, one GSM8K item, tiny budgets, the rules judge)
   then ``userturn report``: every table and the plots the run has data for exist, and
   the page shows the headline, the tables, the decoded images and each context once
   with its samples under it; at 1400 and 800 px nothing runs off the page.
3. Likelihood and rollout runs (the scripted ``fake:`` backend) get their own views:
   no judge advice and no judged plots on a likelihood run, candidates per context;
   a rollout is one conversation with a verdict per model-written turn.
2. A synthetic run whose answers and user turns contain ``</script>`` and other markup:
   the transcript filters (model, dataset, T, perturbation, label) narrow the cards to
   exactly the matching records, the markup is shown as text and never executed, and
   the page makes no network request (it must open offline).

Needs /usr/bin/chromium (``make test`` installs it: apt-get install chromium).
Run: ``.venv/bin/python -m pytest tests/test_report_browser.py -q`` (about a minute).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from browser_helpers import chromium
from synthetic_runs import EVIL, Spec, build_run
from userturn.cli import main

pytestmark = pytest.mark.browser
pytest.importorskip("playwright.sync_api")

TABLES = [
    "accuracy_followup",
    "temperature_sweep",
    "perturbations",
    "failure_modes_family",
    "failure_modes_model",
    "correlation",
    "sampling",
]
"""The tables a generation run with k > 1 has rows for; ``report`` leaves out a table
with no rows (``likelihood`` and ``rollout`` here)."""


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with chromium(tmp_path_factory.mktemp("profile"), height=900, timeout_ms=20_000) as ctx:
        yield ctx


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    p = browser.new_page()
    p.requests = []  # type: ignore[attr-defined]
    p.errors = []  # type: ignore[attr-defined]
    p.on("request", lambda r: p.requests.append(r.url))
    p.on("pageerror", lambda e: p.errors.append(str(e)))
    try:
        yield p
    finally:
        p.close()


def _open(page: Any, html: Path) -> None:
    page.goto(html.resolve().as_uri())
    page.wait_for_selector("#cards")


def _images_decoded(page: Any) -> list[int]:
    return list(
        page.eval_on_selector_all(
            "figure img", "els => els.map(e => e.complete ? e.naturalWidth : 0)"
        )
    )


def _cards(page: Any) -> int:
    return int(page.eval_on_selector_all("#cards .card", "els => els.length"))


def _samples(page: Any) -> int:
    return int(page.eval_on_selector_all("#cards .sample", "els => els.length"))


def test_real_run_report(tmp_path: Path, page: Any) -> None:
    out = tmp_path / "run"
    assert (
        main(
            [
                "run",
                "--model",
                "smollm2-135m",
                "--dataset",
                "gsm8k",
                "--limit",
                "1",
                "--temperatures",
                "0,0.7",
                "--samples",
                "2",
                "--perturb",
                "none",
                "--perturb",
                "truncate:0.5",
                "--judge",
                "rules",
                "--max-answer-tokens",
                "32",
                "--max-user-tokens",
                "12",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert main(["report", "--run", str(out)]) == 0
    rep = out / "report"
    for name in TABLES:
        for ext in ("md", "csv", "tex"):
            assert (rep / "tables" / f"{name}.{ext}").stat().st_size > 0
    drawn = ["rate_vs_temperature", "accuracy_vs_followup", "failure_labels"]
    drawn += ["perturbation_deltas", "gf_at_k", "item_spread"]
    assert sorted(p.stem for p in (rep / "plots").glob("*.png")) == sorted(drawn)
    for name in drawn:
        assert (rep / "plots" / f"{name}.png").stat().st_size > 1000
        assert (rep / "plots" / f"{name}.svg").read_text().lstrip().startswith("<?xml")
    n_turns = sum(1 for _ in (out / "records.jsonl").open())
    assert n_turns == 2 * (1 + 2)

    _open(page, rep / "report.html")
    shown = page.eval_on_selector_all("section.table", "els => els.map(e => e.id)")
    assert {f"table-{n}" for n in TABLES} <= set(shown), shown
    assert "table-likelihood" not in shown and "table-rollout" not in shown
    assert not (rep / "tables" / "likelihood.md").exists()
    sweep = page.text_content("#table-temperature_sweep")
    assert "smollm2-135m" in sweep and "T=0.7" in sweep
    assert _images_decoded(page) and all(w > 300 for w in _images_decoded(page))
    assert len(_images_decoded(page)) == len(drawn)
    headline = page.text_content("#headline")
    assert "smollm2-135m" in headline and "gsm8k" in headline and "%" in headline
    assert page.eval_on_selector_all("#headline tbody tr", "els => els.length") == 1
    # one card per context (the plain and the truncated answer), its 3 samples under it
    assert _cards(page) == 2
    assert page.eval_on_selector_all("#cards .sample", "els => els.length") == n_turns
    first = page.text_content("#cards .card")
    assert "generated user turn" in first and "rules" in first
    question = page.text_content("#cards .card .msg pre")
    same = "(els, q) => els.filter(e => e.textContent === q).length"
    assert page.eval_on_selector_all("#cards .msg pre", same, question) == 2  # once a card
    for width in (1400, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert _overflow(page) == [], width
    assert page.errors == []  # type: ignore[attr-defined]


def _overflow(page: Any) -> list[str]:
    """Elements wider than the page, and tables wider than their box (the label tables
    have ten columns: they must wrap their headers, not scroll)."""
    return list(
        page.evaluate(
            """() => {
      const root = document.documentElement, W = root.clientWidth, bad = [];
      if (root.scrollWidth > W) bad.push("page " + root.scrollWidth + " > " + W);
      for (const e of document.querySelectorAll(".tablewrap")) {
        if (e.scrollWidth > e.clientWidth + 1) bad.push("table " + e.closest("[id]").id);
      }
      for (const e of document.querySelectorAll("body *")) {
        if (e.closest(".tablewrap, pre")) continue;
        const r = e.getBoundingClientRect();
        if (r.width && r.right > W + 1) bad.push(e.tagName + "." + e.className + " " + r.right);
      }
      return bad.slice(0, 10);
    }"""
        )
    )


@pytest.fixture(scope="module")
def synthetic_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = build_run(tmp_path_factory.mktemp("syn"), Spec(items=3))
    assert main(["report", "--run", str(run)]) == 0
    return run


def _records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "records.jsonl").open()]


def _select(page: Any, field: str, value: str) -> None:
    page.select_option(f"#f-{field}", value)


def test_transcript_filters_match_records(synthetic_report: Path, page: Any) -> None:
    recs = _records(synthetic_report)
    _open(page, synthetic_report / "report" / "report.html")
    contexts = {(r["model"], r["dataset"], r["item_id"], r["perturbation"]) for r in recs}
    assert _cards(page) == 20  # a page of contexts, each with its samples
    assert f"of {len(contexts)} contexts ({len(recs)} matching" in page.text_content("#count")
    _select(page, "model", "smollm-b")
    _select(page, "dataset", "chat")
    _select(page, "temperature", "0.7")
    _select(page, "perturbation", "truncate:0.5")
    want = [
        r
        for r in recs
        if r["model"] == "smollm-b"
        and r["dataset"] == "chat"
        and r["temperature"] == 0.7
        and r["perturbation"] == "truncate:0.5"
    ]
    assert _samples(page) == len(want) == 9
    assert _cards(page) == len({r["item_id"] for r in want}) == 3
    _select(page, "label", "plausible_followup")
    genuine = [r for r in want if r["judgments"][0]["label"] == "plausible_followup"]
    assert 0 < len(genuine) < len(want)
    assert _samples(page) == len(genuine)
    _select(page, "label", "(unparseable)")
    assert _samples(page) == sum(1 for r in want if r["judgments"][0]["status"] == "unparseable")
    for field in ("model", "dataset", "temperature", "perturbation", "label"):
        _select(page, field, "")
    assert f"({len(recs)} matching" in page.text_content("#count")
    page.click("#more")
    assert len(contexts) <= 40  # two pages show them all
    assert _cards(page) == len(contexts)
    assert _samples(page) == len(recs)


def test_markup_in_outputs_is_text_and_page_is_offline(synthetic_report: Path, page: Any) -> None:
    _open(page, synthetic_report / "report" / "report.html")
    _select(page, "model", "qwen-a")
    _select(page, "perturbation", "none")
    _select(page, "temperature", "0")
    shown = page.eval_on_selector_all("pre.user-turn", "els => els.map(e => e.textContent)")
    assert EVIL in shown
    assert page.evaluate("window.__pwned") is None
    assert page.eval_on_selector_all("#cards b", "els => els.length") == 0
    assert "rules says <previous_turn_restate>" in page.text_content("#cards")
    assert all(u.startswith(("file:", "data:")) for u in page.requests)  # type: ignore[attr-defined]
    assert page.errors == []  # type: ignore[attr-defined]
    html = (synthetic_report / "report" / "report.html").read_text()
    assert "http://" not in html.replace("http://www.w3.org", "")
    assert "https://" not in html


def test_report_cli_caps_transcripts_and_rejects_bad_input(
    synthetic_report: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    total = len(_records(synthetic_report))
    assert main(["report", "--run", str(synthetic_report), "--max-transcripts", "10"]) == 0
    assert f"10 of {total} transcripts embedded" in capsys.readouterr().out
    html = (synthetic_report / "report" / "report.html").read_text()
    assert f"The first 10 of {total} user turns" in html
    analysis = json.loads((synthetic_report / "report" / "analysis.json").read_text())
    assert analysis["judge"] == "rules" and len(analysis["cells"]) == 3 * 2 * 3 * 2
    assert main(["report", "--run", str(synthetic_report), "--judge", "nope"]) == 2
    assert "judge 'nope' not in this run" in capsys.readouterr().err
    assert main(["report", "--run", str(tmp_path)]) == 2
    assert main(["report", "--run", str(synthetic_report)]) == 0  # leave it complete


def test_likelihood_run_gets_its_own_view(
    tmp_path: Path, page: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    """No judge on a likelihood run: the page must not ask for one, draw judged plots or
    say "judge None"; each context shows its candidates and which one scored highest."""
    out = tmp_path / "lik"
    argv = ["likelihood", "--model", "fake:x", "--dataset", "healthbench", "--limit", "3"]
    assert main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["report", "--run", str(out)]) == 0
    assert capsys.readouterr().out.startswith("judge: none needed (likelihood probe")
    rep = out / "report"
    assert sorted(p.stem for p in (rep / "plots").glob("*.png")) == ["likelihood"]
    html = (rep / "report.html").read_text()
    assert "judge None" not in html and "judge --run" not in html
    assert "none needed (likelihood probe" in html
    assert '["offline"]' not in html  # the config's unused judge is not listed
    _open(page, rep / "report.html")
    assert "Likelihood probe" in page.text_content("#headline")
    assert page.eval_on_selector_all("#headline tbody tr", "els => els.length") == 1
    recs = _records(out)
    assert _cards(page) == len(recs) == 3
    scored = [r for r in recs if not r["excluded"]]  # a reference that copies a context turn
    left_out = page.eval_on_selector_all("#cards .excluded", "els => els.length")
    assert left_out == len(recs) - len(scored)
    cands = page.eval_on_selector_all("#cards table.cands", "els => els.length")
    assert cands == len(scored) > 0
    rows = page.eval_on_selector_all("#cards table.cands tr", "els => els.length")
    assert rows == sum(len(r["candidates"]) + 1 for r in scored)
    verdicts = page.eval_on_selector_all(".verdict", "els => els.map(e => e.textContent)")
    assert [v.startswith("the real turn scores highest") for v in verdicts] == [
        r["prefers_real"] for r in scored
    ]
    measures = page.eval_on_selector_all(".measures", "els => els.map(e => e.textContent)")
    assert len(measures) == len(scored) and all("answer PMI" in m for m in measures)
    shown = page.eval_on_selector_all("#cards details .msg", "els => els.length")
    assert shown >= sum(len(r["counterfactuals"]) for r in scored)  # what was scored
    for width in (1400, 800):
        page.set_viewport_size({"width": width, "height": 900})
        assert _overflow(page) == [], width
    assert page.errors == []  # type: ignore[attr-defined]


def test_rollout_run_shows_one_conversation_per_card(tmp_path: Path, page: Any) -> None:
    out = tmp_path / "roll"
    argv = ["rollout", "--model", "fake:x", "--dataset", "gsm8k", "--limit", "2", "--turns", "3"]
    assert main([*argv, "--judge", "rules", "--out", str(out)]) == 0
    assert main(["report", "--run", str(out)]) == 0
    rep = out / "report"
    plots = sorted(p.stem for p in (rep / "plots").glob("*.png"))
    assert "rollout_turns" in plots and "rate_vs_temperature" not in plots
    _open(page, rep / "report.html")
    assert "Rollouts (judge rules)" in page.text_content("#headline")
    recs = _records(out)
    convs = {(r["item_id"], r["temperature"], r["sample"]) for r in recs}
    assert _cards(page) == len(convs) == 2
    turns = page.eval_on_selector_all("#cards .turn", "els => els.length")
    assert turns == len(recs)
    heads = page.eval_on_selector_all(
        "#cards .card:first-child .turn h4", "els => els.map(e => e.textContent)"
    )
    assert [h.split(",")[0] for h in heads] == [f"user turn {t}" for t in (1, 2, 3)][: len(heads)]
    assert page.errors == []  # type: ignore[attr-defined]
