"""Tests for judge cards (``userturn.judges.card``) and the shipped cards.

Run: ``.venv/bin/python -m pytest tests/judges/test_card.py -q``. The counting tests use a
scripted judge (pure logic); the shipped-card tests read ``judges/cards/*.json`` and check
that every figure can be recomputed from the card's own counts.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from userturn.errors import UserError
from userturn.judges import protocol
from userturn.judges.base import Judge
from userturn.judges.card import (
    build_card,
    card_digest,
    card_filename,
    load_card,
    reference_rows,
    write_card,
)
from userturn.judges.offline import OfflineJudge
from userturn.judges.rules import RulesJudge
from userturn.spec import Spec
from userturn.types import LABELS, JudgeInput, Judgment, Label

KEYS = {
    "card_id", "judge", "version", "method", "references", "sigma", "sensitivity",
    "specificity", "labels", "label_confusion", "control_set", "created",
}  # fmt: skip
CONTROL = Path(__file__).parent / "fixtures" / "control_set.jsonl"


class Scripted(Judge):
    """Returns a fixed label per turn text; ``None`` means a failed judgment."""

    version = "s-1"

    def __init__(self, script: dict[str, Label | None]) -> None:
        super().__init__(Spec(kind="scripted", target="", raw="scripted"))
        self.script = script

    def judge(self, inputs: list[JudgeInput]) -> list[Judgment]:
        out = []
        for item in inputs:
            label = self.script[item.user_turn]
            if label is None:
                out.append(Judgment(self.id, None, None, "error: boom", "error"))
            else:
                out.append(Judgment(self.id, label == "plausible_followup", label, "scripted"))
        return out


def _ref(tmp_path: Path, rows: list[tuple[str, str]]) -> Path:
    path = tmp_path / "ref.jsonl"
    lines = [
        {"id": f"r{i}", "messages": [{"role": "user", "content": "q"}], "user_turn": turn,
         "genuine_followup": label == "plausible_followup", "label": label}
        for i, (turn, label) in enumerate(rows)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


@pytest.fixture
def card(tmp_path: Path) -> dict[str, Any]:
    rows = [
        ("a", "plausible_followup"),  # tp
        ("b", "plausible_followup"),  # fn (called new_task_prompt)
        ("c", "new_task_prompt"),  # fp
        ("d", "previous_turn_restate"),  # tn, label right
        ("e", "other"),  # tn, label wrong
        ("f", "other"),  # judge failed: excluded
    ]
    script: dict[str, Label | None] = {
        "a": "plausible_followup", "b": "new_task_prompt", "c": "plausible_followup",
        "d": "previous_turn_restate", "e": "malformed_artifact", "f": None,
    }  # fmt: skip
    return build_card(Scripted(script), [_ref(tmp_path, rows)], method="scripted test")


def test_counts_and_schema(card: dict[str, Any]) -> None:
    assert set(card) >= KEYS
    assert card["card_id"] == "scripted@s-1"
    assert card["sigma"] == {"tp": 1, "fn": 1, "fp": 1, "tn": 2}
    assert card["excluded"] == 1
    assert card["labels"] == list(LABELS)
    m = card["label_confusion"]
    assert m[LABELS.index("plausible_followup")][LABELS.index("new_task_prompt")] == 1
    assert m[LABELS.index("other")][LABELS.index("malformed_artifact")] == 1
    assert sum(map(sum, m)) == 5
    assert card["references"][0]["n"] == 6 and len(card["references"][0]["sha256"]) == 64
    assert card["control_set"] is None


def _recomputed(count: int, n: int) -> dict[str, float]:
    low, high = proportion_confint(count, n, alpha=0.05, method="wilson")
    return {"value": round(count / n, 4), "ci_low": round(low, 4), "ci_high": round(high, 4)}


def test_intervals_follow_from_the_counts(card: dict[str, Any]) -> None:
    s = card["sigma"]
    assert card["sensitivity"] == _recomputed(s["tp"], s["tp"] + s["fn"])
    assert card["specificity"] == _recomputed(s["tn"], s["tn"] + s["fp"])


def test_strata_split_the_counts_by_model_and_dataset(tmp_path: Path) -> None:
    """Rows that name their model and dataset are counted per stratum too; the strata
    add up to the pooled counts, and rows without the field are left out of it."""
    rows = [("a", "plausible_followup"), ("b", "plausible_followup"), ("c", "new_task_prompt"),
            ("d", "other")]  # fmt: skip
    path = _ref(tmp_path, rows)
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    for line, model in zip(lines, ["m1", "m1", "m2", "m2"], strict=True):
        line["model"] = model
    lines[0]["dataset"] = "gsm8k"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    script: dict[str, Label | None] = {"a": "plausible_followup", "b": "other",
                                       "c": "plausible_followup", "d": "other"}  # fmt: skip
    card = build_card(Scripted(script), [path])
    by_model = card["strata"]["model"]
    assert by_model["m1"]["sigma"] == {"tp": 1, "fn": 1, "fp": 0, "tn": 0}
    assert by_model["m2"]["sigma"] == {"tp": 0, "fn": 0, "fp": 1, "tn": 1}
    assert by_model["m1"]["sensitivity"] == _recomputed(1, 2)
    assert by_model["m2"]["sensitivity"]["value"] is None  # no genuine reference row
    assert (by_model["m2"]["reference_rate"], by_model["m2"]["judged_rate"]) == (0.0, 0.5)
    assert list(card["strata"]["dataset"]) == ["gsm8k"]
    assert card["strata"]["dataset"]["gsm8k"]["by_model"] == {
        "m1": {"tp": 1, "fn": 0, "fp": 0, "tn": 0}  # the dataset's cross counts by model
    }
    assert list(card["strata"]["file"]) == ["ref.jsonl"]
    assert sum(p["sigma"]["tp"] for p in card["strata"]["style"].values()) == 1


def test_offline_card_has_style_strata_over_every_reference_file() -> None:
    """The shipped card covers the fluent and the real human files, the held-out one
    judged by the shipped model, and breaks σ down by style."""
    judge = OfflineJudge(Spec(kind="offline", target="", raw="offline"))
    card = load_card("offline", judge.version)
    assert card is not None
    assert {r["file"] for r in card["references"]} == {
        "judge_train.jsonl", "judge_dev.jsonl", "judge_realistic.jsonl",
        "judge_human.jsonl", "judge_human_heldout.jsonl"}  # fmt: skip
    assert set(card["strata"]["style"]) == set(protocol.STYLES)
    assert "grouped by context" in card["method"]
    assert "judge_human_heldout.jsonl, real human turns never fit on" in card["method"]


def _row(first: str, turn: str = "ok", origin: str = "model") -> dict[str, Any]:
    msgs = [{"role": "user", "content": first}, {"role": "assistant", "content": "a"}]
    return {"messages": msgs, "user_turn": turn, "origin": origin}


def test_grouped_folds_never_split_a_conversation() -> None:
    """Rows answering one conversation (same first request, any answer variant) share a
    fold; row-level folds put 350 of the 477 small-model rows beside a sibling."""
    rows = [_row(f"question {i // 3}") for i in range(60)]
    rows[1]["messages"][0]["content"] = "  QUESTION   0 "  # whitespace and case variant
    genuine = np.array([i % 2 == 0 for i in range(60)])
    groups = protocol.groups(rows)
    seen: dict[str, int] = {}
    for k, (train, test) in enumerate(protocol.folds(rows, genuine)):
        assert not set(groups[train]) & set(groups[test])
        for g in groups[test]:
            assert seen.setdefault(str(g), k) == k
    assert len(seen) == 20


def _out_of_fold(
    tmp_path: Path, name: str, rows: list[dict[str, Any]]
) -> tuple[list[set[str]], dict[str, float]]:
    """Cross-fit the offline recipe on ``rows`` as the card does: the folds (as sets of
    row ids) and each row's out-of-fold P(genuine)."""
    from userturn.judges import offline_fit

    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ref = offline_fit.load_reference([path])
    shipped = OfflineJudge(Spec(kind="offline", target="", raw="offline"))
    judge = offline_fit.CrossFitJudge(ref, shipped)
    inputs = [JudgeInput.of_row(r) for r in rows]
    verdicts = judge.judge(inputs)
    assert all(v.status == "ok" and v.probability is not None for v in verdicts)
    ids = [str(r["id"]) for r in rows]
    folds = [{ids[i] for i in test} for _, test in protocol.folds(rows, ref.genuine)]
    return folds, {i: float(v.probability or 0.0) for i, v in zip(ids, verdicts, strict=True)}


def test_out_of_fold_verdicts_ignore_their_own_folds_labels(tmp_path: Path) -> None:
    """The second half of "the card is optimistic" (issue P, finding 4): a reference
    turn's card verdict comes from a model that never saw its label. Swapping the
    reference labels of one fold's rows and fitting again leaves that fold's out-of-fold
    P(genuine) exactly as it was, while the other folds' models, which train on those
    rows, move (so a fold whose labels reached its own model would fail here).

    The folds are σ-stratified (``protocol.folds``), so flipping every label of a fold
    would move conversations between folds; the swap exchanges the labels of a genuine
    and a degenerate row of one conversation, which keeps each conversation's counts and
    so the folds. Whole conversations from the realistic reference file keep the two fits
    to about half a minute on 2 cores."""
    from shared_files import SHARED

    source = SHARED / "judge_realistic.jsonl"
    if not source.is_file():
        pytest.skip(f"{source} not found: check out shared/ beside the repo or set USERTURN_SHARED")
    every = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines()]
    groups = protocol.groups(every)
    kept = set(list(dict.fromkeys(groups.tolist()))[:SUBSET_GROUPS])
    rows = [r for r, g in zip(every, groups, strict=True) if g in kept]
    folds, before = _out_of_fold(tmp_path, "ref", rows)
    swapped = _swap_labels(rows, folds[0])
    changed_rows = {r["id"] for r, s in zip(rows, swapped, strict=True) if r != s}
    assert len(changed_rows) >= 6 and changed_rows <= folds[0]
    folds_after, after = _out_of_fold(tmp_path, "swapped", swapped)
    assert folds_after == folds  # the same rows in each fold: four of five fits see the swap
    own = sorted(folds[0])
    assert [after[i] for i in own] == [before[i] for i in own]
    moved = [i for i in before if i not in folds[0] and after[i] != before[i]]
    assert moved, "no other fold's predictions moved: the swap reached no fit"


SUBSET_GROUPS = 30
"""Conversations in the cross-fit test's subset (all their rows: 90)."""


def _swap_labels(rows: list[dict[str, Any]], fold: set[str]) -> list[dict[str, Any]]:
    """``rows`` with, in each conversation of ``fold``, the reference labels of its
    genuine and degenerate rows exchanged pairwise (each swapped row's verdict flips)."""
    out = list(rows)
    by_group: dict[str, list[int]] = {}
    for i, g in enumerate(protocol.groups(rows).tolist()):
        if rows[i]["id"] in fold:
            by_group.setdefault(str(g), []).append(i)
    for members in by_group.values():
        yes = [i for i in members if rows[i]["genuine_followup"]]
        no = [i for i in members if not rows[i]["genuine_followup"]]
        for a, b in zip(yes, no, strict=False):
            keys = ("genuine_followup", "label")
            out[a] = {**rows[a], **{k: rows[b][k] for k in keys}}
            out[b] = {**rows[b], **{k: rows[a][k] for k in keys}}
    return out


def test_transfer_and_leave_one_out_splits() -> None:
    files = np.array(["judge_train.jsonl", "judge_realistic.jsonl", "judge_dev.jsonl"])
    split = protocol.transfer(files)
    assert [list(x) for x in split["small_to_realistic"]] == [[0, 2], [1]]
    assert [list(x) for x in split["realistic_to_small"]] == [[1], [0, 2]]
    assert "others_to_human" not in split  # no real human file: no such transfer
    with_human = protocol.transfer(np.append(files, protocol.HUMAN_FILE))
    assert [list(x) for x in with_human["others_to_human"]] == [[0, 1, 2], [3]]
    parts = list(protocol.leave_one_out(np.array(["a", "b", "a"])))
    assert [(list(tr), list(te)) for tr, te in parts] == [([1], [0, 2]), ([0, 2], [1])]


@pytest.mark.parametrize(
    ("turn", "origin", "style"),
    [
        (
            "wait why is the weekend 1/16 of 1600 each? wouldnt that change it",
            "written",
            "written_human_like",
        ),
        (
            "my son is 8 months and his temp was 100.6 last night. is that teething",
            "written",
            "written_human_like",
        ),
        ("Here's a thinking process: 1. Analyze the request.", "written", "written_model_like"),
        ("<|im_start|>user\nWhy?<|im_end|>", "written", "written_model_like"),
        ("Could you clarify why the weekend counts separately?", "written", "written_model_like"),
        ("Why?", "model", "model_output"),
        ("how do i fix this", "human", "real_human"),
    ],
)
def test_style_strata(turn: str, origin: str, style: str) -> None:
    assert protocol.style(_row("q", turn, origin)) == style


def test_a_verbatim_copy_of_the_request_reads_model_like() -> None:
    request = "elderly aunt stumbling lately, is it normal aging or something else to check"
    assert protocol.style(_row(request, request, "written")) == "written_model_like"


def test_write_then_read_back(card: dict[str, Any], tmp_path: Path) -> None:
    path = write_card(card, tmp_path / "cards")
    assert path.name == "scripted.json"
    assert json.loads(path.read_text()) == card


def test_card_file_names_are_safe() -> None:
    assert card_filename("llm:openai:gpt-5.4-mini?x=1") == "llm_openai_gpt-5.4-mini_x_1.json"


def test_bad_reference_file_is_a_user_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n')
    with pytest.raises(UserError, match=r"bad\.jsonl:1"):
        build_card(Scripted({}), [bad])


def test_control_set_summary(tmp_path: Path) -> None:
    rules = RulesJudge(Spec(kind="rules", target="", raw="rules"))
    card = build_card(rules, [_ref(tmp_path, [("Thanks!", "degenerate_short")])], CONTROL)
    control = card["control_set"]
    assert control["n"] == len(CONTROL.read_text().splitlines())
    assert 0.0 <= control["label_accuracy"] <= control["sigma_accuracy"] <= 1.0


@pytest.mark.parametrize(
    "judge",
    [
        OfflineJudge(Spec(kind="offline", target="", raw="offline")),
        RulesJudge(Spec(kind="rules", target="", raw="rules")),
    ],
    ids=["offline", "rules"],
)
def test_shipped_cards_match_the_shipped_judges(judge: Judge) -> None:
    card = load_card(judge.id, judge.version)
    assert card is not None, f"no card for {judge.id}@{judge.version}: re-run offline_fit --cards"
    assert set(card) >= KEYS
    s = card["sigma"]
    assert sum(s.values()) + card["excluded"] == sum(r["n"] for r in card["references"])
    assert card["sensitivity"] == _recomputed(s["tp"], s["tp"] + s["fn"])
    assert card["specificity"] == _recomputed(s["tn"], s["tn"] + s["fp"])
    assert sum(map(sum, card["label_confusion"])) == sum(s.values())
    assert card["control_set"]["n"] > 0
    for field in ("model", "dataset", "style", "file"):  # every reference row has each
        parts = card["strata"][field].values()
        assert {k: sum(p["sigma"][k] for p in parts) for k in s} == s
    for entry in card["strata"]["dataset"].values():  # the cross counts add up to each
        cells = entry["by_model"].values()
        assert {k: sum(c[k] for c in cells) for k in s} == entry["sigma"]


def test_offline_card_is_out_of_fold() -> None:
    judge = OfflineJudge(Spec(kind="offline", target="", raw="offline"))
    card = load_card("offline", judge.version)
    assert card is not None
    assert "out-of-fold" in card["method"]
    assert load_card("offline", "offline-0+stale") is None


def test_card_written_into_a_run_updates_its_corrected_rates(tmp_path: Path) -> None:
    """``judge card --run DIR`` rewrites summary.json at once: the run's cells switch from
    the shipped card to the run's own."""
    from shared_files import SHARED
    from userturn.cli import main

    run = tmp_path / "run"
    assert (
        main(["run", "--model", "fake:x", "--limit", "6", "--judge", "rules", "--out", str(run)])
        == 0
    )
    before = json.loads((run / "summary.json").read_text())["cells"]
    ref = tmp_path / "ref.jsonl"
    rows = (SHARED / "judge_dev.jsonl").read_text(encoding="utf-8").splitlines()[:40]
    ref.write_text("\n".join(rows) + "\n", encoding="utf-8")
    argv = ["judge", "card", "--judge", "rules", "--ref", str(ref), "--run", str(run)]
    assert main(argv) == 0
    card = json.loads((run / "judge_cards" / card_filename("rules")).read_text())
    assert sum(card["sigma"].values()) == 40
    after = json.loads((run / "summary.json").read_text())["cells"]
    assert [c["rate"] for c in after] == [c["rate"] for c in before]
    assert {c["judge_card_sha"] for c in after} == {card_digest(card)}
    assert {c["judge_card_sha"] for c in before} != {card_digest(card)}
    key = "ci_corrected_low"  # the rate is 100% here, so its corrected value clips to 1
    assert [c[key] for c in after] != [c[key] for c in before]


@pytest.mark.parametrize(
    ("line", "where"),
    [
        ("not json", "bad.jsonl:1: invalid JSON"),
        ('{"id": "x"}', "bad.jsonl:1: field 'messages': missing"),
        ('{"id": "x", "messages": [], "user_turn": "t", "genuine_followup": true,'
         ' "label": "new_task_prompt"}', "bad.jsonl:1: field 'label':"),
        ('{"id": "x", "messages": [], "user_turn": "t", "genuine_followup": false,'
         ' "label": "nonsense"}', "bad.jsonl:1: field 'label':"),
    ],
)  # fmt: skip
def test_a_bad_reference_row_names_its_line_and_field(
    tmp_path: Path, line: str, where: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(line + "\n")
    with pytest.raises(UserError) as info:
        build_card(Scripted({}), [bad])
    assert f"{tmp_path}/{where}" in str(info.value), str(info.value)


def test_judge_card_prints_a_table_or_the_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The shipped offline card as a table (σ overall and per stratum, figures from the
    card) and, with --format json, as the very JSON written to the folder."""
    from userturn.cli import main

    monkeypatch.setenv("COLUMNS", "120")
    assert main(["judge", "card", "--judge", "offline", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    card = json.loads((tmp_path / "offline.json").read_text())
    gsm8k = card["strata"]["dataset"]["gsm8k"]["sensitivity"]
    row = next(line for line in text.splitlines() if line.startswith("dataset gsm8k"))
    assert f"{gsm8k['value']:.2f} [{gsm8k['ci_low']:.2f}, {gsm8k['ci_high']:.2f}]" in row
    assert text.splitlines()[0] == f"judge card {card['card_id']}" and "method:" in text
    pairs = text[text.index("what corrected rates assume, per dataset × model") :]
    row = next(line for line in pairs.splitlines() if line.startswith("sharegpt  "))
    first = sorted(card["strata"]["dataset"]["sharegpt"]["by_model"])[0]
    s = card["strata"]["dataset"]["sharegpt"]["by_model"][first]
    assert row.split()[1:4] == [first, str(sum(s.values())), f"{s['tp']}/{s['tp'] + s['fn']}"]
    assert any(line.startswith("(new)") for line in pairs.splitlines())
    assert main(["judge", "card", "--judge", "offline", "--out", str(tmp_path),
                 "--format", "json"]) == 0  # fmt: skip
    assert json.loads(capsys.readouterr().out) == card


def test_the_fit_never_reads_the_held_out_human_file() -> None:
    """``judge_human_heldout.jsonl`` is the offline judge's held-back check on people's
    turns: the fit's inputs exclude it, and the shipped parameters record exactly the fit
    files, with the packaged human file's hash."""
    from userturn.judges import offline_fit

    paths = offline_fit.default_references()
    assert [p.name for p in paths] == list(protocol.FIT_FILES)
    assert protocol.HELDOUT_FILE not in [p.name for p in paths]
    params = json.loads(offline_fit.default_output().read_text())
    fit = params["fit"]["references"]
    assert [r["file"] for r in fit] == list(protocol.FIT_FILES)
    human = next(p for p in paths if p.name == protocol.HUMAN_FILE)
    digest = hashlib.sha256(human.read_bytes()).hexdigest()
    assert next(r["sha256"] for r in fit if r["file"] == protocol.HUMAN_FILE) == digest
    assert params["fit"]["human_weight"] == offline_fit.HUMAN_WEIGHT
    heldout = offline_fit.heldout_reference()
    held = set(protocol.groups([r for _, r in reference_rows(heldout)]).tolist())
    fitted = {g for p in paths for g in protocol.groups([r for _, r in reference_rows(p)])}
    assert len(held) > 250 and not held & fitted  # no conversation on both sides


def test_a_cards_digest_names_its_measurement_not_its_date() -> None:
    """The digest ignores ``created`` (one measurement, re-written another day) and moves
    with any count (the same judge version on grown reference files)."""
    card = load_card("rules", RulesJudge(Spec(kind="rules", target="", raw="rules")).version)
    assert card is not None
    assert card_digest({**card, "created": "1999-01-01"}) == card_digest(card)
    grown = {**card, "sigma": {**card["sigma"], "tn": card["sigma"]["tn"] + 1}}
    assert card_digest(grown) != card_digest(card)
    assert len(card_digest(card)) == 12
