"""Tests for the learned offline judge (``userturn.judges.offline`` and its parts).

Run: ``.venv/bin/python -m pytest tests/judges/test_offline.py -q`` (a few seconds; the
full re-fit check is marked slow: ``-m slow``). Honest agreement figures (cross-validated,
leave-one-model/dataset-out) come from ``bench/judge_offline.py``, not from here: these
tests check the judge's contract, its gates, the shipped parameters and the numpy forest.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.metrics import cohen_kappa_score

from shared_files import SHARED
from userturn.errors import UserError
from userturn.judges import offline_fit
from userturn.judges.offline import (
    ALL_NAMES,
    CODE_VERSION,
    OfflineJudge,
    Params,
    shipped_params,
)
from userturn.judges.offline_cues import (
    acts_on_answer,
    asks_for_input,
    challenges,
    hands_over,
    invites_move,
    makes_move,
)
from userturn.judges.offline_forest import Forest, forest_to_json
from userturn.spec import Spec
from userturn.types import LABELS, JudgeInput, Judgment

FIXTURES = Path(__file__).parent / "fixtures"
CONTROL_SIGMA_FLOOR = 0.9
"""The shipped judge gets 105 of the 109 planted cases' σ right (0.96; bench/judge_offline.py,
cards/offline.json); a drop below this floor means a feature or gate broke."""


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _inputs(rows: list[dict[str, Any]]) -> list[JudgeInput]:
    return [JudgeInput.of_row(r) for r in rows]


CONTROL = _rows(FIXTURES / "control_set.jsonl")
CHALLENGES = _rows(FIXTURES / "challenge_cases.jsonl")


def _spec(raw: str = "offline", **options: str) -> Spec:
    return Spec(kind="offline", target="", options=options, raw=raw)


@pytest.fixture(scope="module")
def judge() -> OfflineJudge:
    return OfflineJudge(_spec())


@pytest.fixture(scope="module")
def control_verdicts(judge: OfflineJudge) -> list[Judgment]:
    return judge.judge(_inputs(CONTROL))


def _check_invariants(verdicts: list[Judgment], n: int) -> None:
    assert len(verdicts) == n
    for v in verdicts:
        assert v.status == "ok", v.rationale
        assert v.judge == "offline"
        assert v.label in LABELS
        assert v.genuine == (v.label == "plausible_followup")
        assert v.rationale
        assert v.probability is not None and 0.0 <= v.probability <= 1.0
        assert isinstance(v.challenges_answer, bool)
        assert v.version.startswith(f"{CODE_VERSION}+")


def test_control_set_covers_every_label_and_context() -> None:
    assert {r["label"] for r in CONTROL} == set(LABELS)
    assert {r["context"] for r in CONTROL} >= {"math", "code", "health", "writing", "multi"}


def test_invariants_on_control_set(control_verdicts: list[Judgment]) -> None:
    _check_invariants(control_verdicts, len(CONTROL))


def test_control_sigma_accuracy_floor(control_verdicts: list[Judgment]) -> None:
    right = [
        v.genuine == r["genuine_followup"] for v, r in zip(control_verdicts, CONTROL, strict=True)
    ]
    accuracy = sum(right) / len(CONTROL)
    misses = [r["id"] for r, ok in zip(CONTROL, right, strict=True) if not ok]
    assert accuracy >= CONTROL_SIGMA_FLOOR, f"σ accuracy {accuracy:.2f}; missed {misses}"


ISSUE_CASES = [
    ("ctl-math-previous_turn_restate-2", False),  # James re-ask, in other words
    ("ctl-math-new_task_prompt-1", False),  # the bat-and-ball puzzle
    ("ctl-math-new_task_prompt-2", False),  # same-domain new word problem
    ("ctl-math2-new_task_prompt-1", False),  # "What is the answer to this question: ..."
    ("ctl-health2-plausible_followup-2", True),  # "Can you show that as a table?"
    ("ctl-health2-plausible_followup-1", True),  # "Is that per week or per day?"
]
FLUENT_CASES = [
    ("ctl-fmuffins-plausible_followup-1", True),  # "Wait, are you sure ... double-check?"
    ("ctl-fmuffins-plausible_followup-2", True),  # "... as a small table?"
    ("ctl-fmuffins-plausible_followup-3", True),  # a typed what-if
    ("ctl-fmuffins-previous_turn_restate-1", False),  # the question verbatim
    ("ctl-fmuffins-previous_turn_restate-2", False),  # "So what does Maria pay ...?"
    ("ctl-fmuffins-meta_planning-1", False),  # "We need to verify the answer: ..."
    ("ctl-fcode-plausible_followup-1", True),  # "Thanks! Could you add type hints ..."
    ("ctl-fcode-new_task_prompt-1", False),  # "Thanks! Now write a poem about cats."
    ("ctl-fcode-assistant_turn_restate-1", False),  # "Sure! Here's the function ..."
    ("ctl-fcopy-plausible_followup-1", True),  # "... a version aimed at kids?"
    ("ctl-fcopy-assistant_turn_restate-1", False),  # a paraphrase of the answer
    ("ctl-frome-new_task_prompt-1", False),  # "Who was the first president ...?"
    ("ctl-frome-plausible_followup-1", True),  # "why 476 though? ..."
    ("ctl-fmult-previous_turn_restate-1", False),  # "What is 12 x 3?" verbatim
    ("ctl-fjug-assistant_turn_restate-1", False),  # "The answer is 2.5 liters."
    ("ctl-fjug-new_task_prompt-1", False),  # a new word problem on the jug's own topic
    ("ctl-gpens-previous_turn_restate-1", False),  # the question with one number changed
    ("ctl-gpens-new_task_prompt-1", False),  # a new word problem of the same shape
    ("ctl-gpens-assistant_turn_restate-1", False),  # the solution restated, no "Sure/Here"
    ("ctl-gpens-malformed_artifact-1", False),  # a garbled sum
    ("ctl-gknee-assistant_turn_restate-1", False),  # continues the answer's advice
    ("ctl-gknee-plausible_followup-1", True),  # typed details and a next step
    ("ctl-gknee-other-1", False),  # narrates the exchange
    ("ctl-gstory-plausible_followup-1", True),  # "Keep going: ..." with a plot turn
    ("ctl-gstory-other-1", False),  # "Rating: 7/10 ..."
    ("ctl-gtrip-plausible_followup-1", True),  # the details the assistant asked for
    ("ctl-gtrip-degenerate_short-1", False),  # thanks, nothing asked
    ("ctl-gtrip-assistant_turn_restate-1", False),  # the answer's own question asked back
]


@pytest.mark.parametrize(("row_id", "genuine"), FLUENT_CASES)
def test_fluent_cases(judge: OfflineJudge, row_id: str, genuine: bool) -> None:
    """Fluent turns of the kind real models and people write, each of which the
    previous judge (word overlap and cues only) got wrong or nearly so."""
    [row] = [r for r in CONTROL if r["id"] == row_id]
    [verdict] = judge.judge(_inputs([row]))
    assert verdict.genuine is genuine, verdict.rationale


@pytest.mark.parametrize(("row_id", "genuine"), ISSUE_CASES)
def test_cases_from_the_issue(judge: OfflineJudge, row_id: str, genuine: bool) -> None:
    """The rules judge gets each of these wrong (issue H); the offline judge must not."""
    [row] = [r for r in CONTROL if r["id"] == row_id]
    [verdict] = judge.judge(_inputs([row]))
    assert verdict.genuine is genuine, verdict.rationale


@pytest.mark.parametrize(
    ("turn", "label"),
    [
        ("", "degenerate_short"),
        ("Thanks!", "degenerate_short"),
        ("<|im_start|>user\n<|im_start|>", "malformed_artifact"),
        ("<think>The user wants a total. I should multiply.</think>", "meta_planning"),
    ],
)
def test_gates_settle_what_the_references_lack(judge: OfflineJudge, turn: str, label: str) -> None:
    row = CONTROL[0]
    [verdict] = judge.judge([JudgeInput("x", tuple(row["messages"]), turn)])
    assert (verdict.genuine, verdict.label) == (False, label)


def test_rationale_names_probability_and_evidence(control_verdicts: list[Judgment]) -> None:
    learned = [v for v in control_verdicts if v.rationale.startswith("P(genuine)")]
    assert learned, "every verdict came from a gate"
    for v in learned:
        p = f"P(genuine) {v.probability:.2f}"
        assert v.rationale.startswith(p), v.rationale
        assert ":" in v.rationale  # the evidence follows the colon


def test_batch_equals_one_at_a_time(judge: OfflineJudge) -> None:
    """All trees descend together for a batch; a batch must not change any verdict."""
    items = _inputs(CONTROL[:12])
    batch = judge.judge(items)
    alone = [judge.judge([item])[0] for item in items]
    assert batch == alone


def test_odd_context_does_not_raise(judge: OfflineJudge) -> None:
    odd = [
        JudgeInput("a", (), "Can you explain that again?"),
        JudgeInput("b", ({"role": "user", "content": None},), "What about dogs?"),
    ]
    _check_invariants(judge.judge(odd), 2)
    assert judge.judge([]) == []


@pytest.mark.parametrize("row", CHALLENGES, ids=[r["id"] for r in CHALLENGES])
def test_challenge_cue(row: dict[str, Any]) -> None:
    assert challenges(row["user_turn"]) is row["challenges_answer"], row["why"]


def test_challenge_fixture_has_both_classes_and_domains() -> None:
    assert len(CHALLENGES) >= 40
    assert {r["challenges_answer"] for r in CHALLENGES} == {True, False}
    assert len({r["id"].split("-")[1] for r in CHALLENGES}) >= 5


def test_challenge_flag_reaches_the_judgment(judge: OfflineJudge) -> None:
    row = CONTROL[0]
    turns = ["Are you sure? I got $100.", "Why did you multiply 5 by 4 first?"]
    verdicts = judge.judge([JudgeInput(str(i), tuple(row["messages"]), t) for i, t in
                            enumerate(turns)])  # fmt: skip
    assert [v.challenges_answer for v in verdicts] == [True, False]


def test_version_follows_the_parameters() -> None:
    default = OfflineJudge(_spec())
    assert default.version.startswith(f"{CODE_VERSION}+")
    stricter = OfflineJudge(_spec("offline?threshold=0.9", threshold="0.9"))
    assert stricter.threshold == 0.9
    assert stricter.version != default.version


@pytest.mark.parametrize("options", [{"thresh": "0.5"}, {"threshold": "high"}, {"threshold": "2"}])
def test_bad_options_fail_loudly(options: dict[str, str]) -> None:
    with pytest.raises(UserError, match="thresh"):
        OfflineJudge(_spec(**options))


def test_parameters_are_data_for_these_features() -> None:
    params = shipped_params()
    assert params.raw["features"] == list(ALL_NAMES)
    assert set(params.label_classes) <= set(LABELS) - {"plausible_followup"}
    with pytest.raises(UserError, match="features"):
        Params.from_json({**params.raw, "features": list(ALL_NAMES)[:-1]})
    with pytest.raises(UserError, match="gates"):
        Params.from_json({**params.raw, "gates": ["surface", "psychic"]})


def test_forest_matches_scikit_learn() -> None:
    """The numpy descent of the exported trees reproduces predict_proba."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 6))
    y = (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(int) + (x[:, 3] > 1)
    forest = RandomForestClassifier(n_estimators=7, min_samples_leaf=2, random_state=0)
    forest.fit(x, y)
    exported = Forest.from_json(json.loads(json.dumps(forest_to_json(forest.estimators_, 3))))
    probe = rng.normal(size=(50, 6))
    assert np.allclose(exported.predict(probe), forest.predict_proba(probe), atol=1e-5)
    for column in range(3):
        pred, contrib = exported.explain(probe, column)
        bias = exported.value[exported.roots, column].mean()
        assert np.allclose(bias + contrib.sum(axis=1), pred)
        assert np.allclose(pred, forest.predict_proba(probe)[:, column], atol=1e-5)


def test_fit_is_deterministic(monkeypatch: pytest.MonkeyPatch) -> None:
    """Same rows, same parameters, byte for byte (small forests to keep this quick)."""
    monkeypatch.setattr(offline_fit, "N_TREES", 5)
    monkeypatch.setattr(offline_fit, "SIGMA_TREES", 5)
    ref = offline_fit.load_reference([FIXTURES / "control_set.jsonl"])
    first = offline_fit.dumps(offline_fit.fit_arrays(ref))
    assert first == offline_fit.dumps(offline_fit.fit_arrays(ref))
    judge = OfflineJudge(_spec(), params=Params.from_json(json.loads(first)))
    _check_invariants(judge.judge(_inputs(CONTROL[:5])), 5)


def test_reference_rows_are_validated(tmp_path: Path) -> None:
    bad = tmp_path / "ref.jsonl"
    bad.write_text(json.dumps({"id": "a", "messages": [], "user_turn": "x"}) + "\n")
    with pytest.raises(UserError, match="genuine_followup"):
        offline_fit.read_rows(bad)


REFIT_KAPPA_FLOOR = 0.9
"""Least Cohen's κ between the shipped judge and a re-fit on a CPU whose floating-point
arithmetic differs. Such a re-fit differs only by rounding in the act head's solver
(about 1e-5 on its coefficients), which the randomised trees amplify into other splits
and a cut elsewhere on the plateau of tied κ; the two judges still agree on about 99% of
reference turns. A change to the features or the recipe falls far below this floor."""


@pytest.mark.slow
def test_shipped_parameters_are_the_refit() -> None:
    """``python -m userturn.judges.offline_fit`` reproduces the shipped file: byte for byte
    where this CPU's arithmetic and scikit-learn are the fitting machine's, else as the
    same judge.

    The act head is the first step that reads BLAS; BLAS kernels differ between CPU
    families (an AMD EPYC gives coefficients up to 8e-5 off an Intel fit's), so a head
    that differs from the shipped one says the arithmetic differs, not the recipe.
    """
    paths = offline_fit.default_references()
    if not all(p.exists() for p in paths):
        pytest.skip(f"reference files not found under {SHARED}")
    ref = offline_fit.load_reference(paths)
    refit = offline_fit.fit_params(ref)
    text = offline_fit.default_output().read_text()
    shipped = json.loads(text)
    if refit["head"] == shipped["head"] and refit["fit"] == shipped["fit"]:
        assert offline_fit.dumps(refit) == text
        return
    assert _unfitted(refit) == _unfitted(shipped)
    assert refit["labels"]["classes"] == shipped["labels"]["classes"]
    coef = np.array(refit["head"]["coef"]) - np.array(shipped["head"]["coef"])
    assert np.abs(coef).max() < 1e-3, "the act head moved by more than rounding"
    inputs = _inputs(ref.rows)
    ours = OfflineJudge(_spec(), params=Params.from_json(refit)).judge(inputs)
    theirs = OfflineJudge(_spec()).judge(inputs)
    a = [bool(v.genuine) for v in ours]
    b = [bool(v.genuine) for v in theirs]
    assert cohen_kappa_score(a, b) >= REFIT_KAPPA_FLOOR


def _unfitted(params: dict[str, Any]) -> dict[str, Any]:
    """What a re-fit must reproduce on any CPU and scikit-learn: everything but the fitted
    numbers and the scikit-learn version named in ``fit.learner``."""
    out = {k: v for k, v in params.items() if k not in ("head", "sigma", "labels")}
    learner = re.sub(r"^sklearn \S+ ", "sklearn ", out["fit"]["learner"])
    return out | {"fit": out["fit"] | {"learner": learner}}


def test_numpy_encoder_matches_transformers() -> None:
    """The static table is distilled by a numpy BERT; it must be MiniLM's own forward pass."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from safetensors.numpy import load_file

    from userturn.assets import fetch
    from userturn.judges.offline_embed import MINILM, _bert

    folder = fetch(MINILM)
    config = json.loads((folder / "config.json").read_text())
    seq = np.array(
        [[101, 2129, 2172, 2515, 2016, 3477, 102], [101, 2054, 2003, 2023, 1029, 2009, 102]]
    )
    mine = _bert(load_file(str(folder / "model.safetensors")), seq, config)
    model = transformers.BertModel.from_pretrained(str(folder)).eval()
    with torch.no_grad():
        ref = model(torch.tensor(seq)).last_hidden_state.numpy()
    assert np.abs(mine - ref).max() < 1e-4


def test_paraphrase_is_closer_than_a_new_topic() -> None:
    """The static embeddings see a re-ask in other words, which word overlap cannot."""
    from userturn.judges.offline_embed import encoder

    q, para, other = encoder().encode([
        "How much money does Maria spend altogether on the muffins and cookies?",
        "What is the total Maria pays for the cookies and muffins?",
        "Who was the first president of the United States?",
    ])  # fmt: skip
    assert float(q @ para) > float(q @ other) + 0.2


COPD = (
    {"role": "user", "content": "so basically there's no real solution??"},
    {
        "role": "assistant",
        "content": "I understand why you'd feel discouraged. Oxygen supplementation is a major"
        " part of therapy if your blood oxygen is regularly running low, but there can be other"
        " steps to help you cope. For instance, certain inhaled medications can reduce airway"
        " inflammation or help your airways stay open.",
    },
)


def test_a_turn_in_new_words_is_left_to_the_model() -> None:
    """People give new details in new words; a fixed 'nothing points back' verdict called
    such turns new tasks. Now no gate fires and ``ungrounded`` is a feature."""
    from userturn.judges.offline import gate
    from userturn.judges.offline_features import measure_turn

    m = measure_turn(COPD, "im 71 and already on spiriva. what else would they add")
    assert m.values["ungrounded"] == 1.0
    assert gate(m) is None


@pytest.mark.parametrize(
    ("turn", "feature"),
    [
        ("Perfect, that's exactly what I needed. Thanks a lot!", "thanks_only"),
        ("The user thanks the assistant and asks about oxygen.", "narration"),
        ("Score: 6/10. Accurate but vague about oxygen.", "rating"),
        ("What's the difference between COPD and asthma?", "definitional"),
        ("im 71 and on spiriva since 2019", "personal_numbers"),
        ("so could the inhaled ones help me?", "connective"),
        ("Therefore the answer is oxygen plus inhalers.", "conclusion"),
        ("continue, but shorter", "continue_request"),
        ("```python\nprint(1)\n```", "code"),
    ],
)
def test_discourse_features(turn: str, feature: str) -> None:
    from userturn.judges.offline_features import measure_turn

    assert measure_turn(COPD, turn).values[feature] == 1.0
    assert measure_turn(COPD, "Which inhaled medication would you try first?").values[feature] == 0


def test_answer_asking_for_details_is_seen() -> None:
    from userturn.judges.offline_features import measure_turn

    ask = (COPD[0], {"role": "assistant", "content": "Could you tell me more: how old are you?"})
    assert measure_turn(ask, "71").values["answer_asks_details"] == 1.0
    assert measure_turn(COPD, "71").values["answer_asks_details"] == 0.0


def test_reask_with_a_number_changed() -> None:
    """Close to the request while keeping one of its numbers and changing another."""
    from userturn.judges.offline_meaning import SIMILARITIES, measure_meaning

    pens = (
        {"role": "user", "content": "A box holds 24 pens. Lena buys 3 boxes. How many pens?"},
        {"role": "assistant", "content": "3 x 24 = 72 pens."},
    )
    at = SIMILARITIES.index("emb_reask_numbers")
    changed = measure_meaning(pens, "A box holds 24 pens. Lena buys 4 boxes. How many pens?")
    same = measure_meaning(pens, "A box holds 24 pens. Lena buys 3 boxes. How many pens?")
    assert changed.similarities[at] > 0.8
    assert same.similarities[at] == 0.0


@pytest.mark.parametrize(
    "text",
    ["Nice. Now can you write a version aimed at kids?", "Keep going: he opens the bottle."],
)
def test_revision_cue_reads_versions_and_continuations(text: str) -> None:
    from userturn.judges import offline_cues

    assert offline_cues.REVISION.search(text)
    assert not offline_cues.REVISION.search("Thanks! Now write a poem about cats.")


@pytest.mark.parametrize(
    ("turn", "acts"),
    [
        ("Can you show the calculation as a small table?", True),
        ("Make it a bit firmer and mention it's been broken for a week.", True),
        ("shorten this", True),
        ("Can you write one that emphasises the quadrants?", True),
        ("you cut off after the bacon, keep going", True),
        ("Continue writing please", True),
        # asking for the answer again, simpler or deeper, names nothing but is about it
        ("get me a detailed answer", True),
        ("oh no! i didnt understand single word! please explain me like im five year old", True),
        # ... unless it is the answering side failing to read a request
        ("I'm sorry, but I don't understand your request. Can you clarify?", False),
        # a new task brings its own material, or a relative "that" points at nothing
        ("Can you show me a SwiftUI MVVM application that uses NetworkManager", False),
        ("Translate 'good morning, how are you?' into Japanese.", False),
        ("Thanks! Now write a poem about cats.", False),
        # refusing to carry on, or "continue" quoted further down, is no request
        ("I'm sorry, but I can't continue this conversation as the user.", False),
        ('Web search results:\n\n[1] "continue: [verb] to maintain"', False),
    ],
)
def test_acts_on_answer(turn: str, acts: bool) -> None:
    assert acts_on_answer(turn) is acts


def test_a_request_on_the_answer_is_genuine_by_gate(judge: OfflineJudge) -> None:
    """The learner alone scored this below its threshold (P 0.46 in offline-3): no word
    is shared with the answer. The gate reads the request's object instead."""
    [row] = [r for r in CONTROL if r["id"] == "ctl-fmuffins-plausible_followup-2"]
    [verdict] = judge.judge(_inputs([row]))
    assert (verdict.genuine, verdict.label) == (True, "plausible_followup")
    assert "revise or carry on the answer" in verdict.rationale
    assert verdict.rationale.startswith(f"P(genuine) {verdict.probability:.2f}; ")


def test_a_gate_family_left_out_of_the_parameters_is_off() -> None:
    """Parameters name the gates they were fit with; a file without ``act`` keeps the
    model's verdict, so older parameter files judge as they did."""
    raw = shipped_params().raw
    gates = ["surface", "task", "voice"]
    older = OfflineJudge(_spec(), params=Params.from_json({**raw, "gates": gates}))
    [row] = [r for r in CONTROL if r["id"] == "ctl-fmuffins-plausible_followup-2"]
    [verdict] = older.judge(_inputs([row]))
    assert "revise or carry on the answer" not in verdict.rationale
    assert verdict.genuine is False  # the model alone: P below the threshold


ASKS = "Happy to help! Could you tell me a bit more: how old is he, and what has he tried?"


@pytest.mark.parametrize(
    ("turn", "answer", "handed"),
    [
        ("he's 54, I think he tried ibuprofen twice", ASKS, True),
        ("we only have a ct scanner no neurosurgeon", ASKS, True),
        # a closing formula asks nothing in particular
        ("I tried ibuprofen twice", "Rest helps. Let me know if you have any questions?", False),
        # a question back, a task set up, or advice in the answering side's voice
        ("Is he 54?", ASKS, False),
        ("I want you to write an article about knees", ASKS, False),
        ("I hear you. I recommend seeing a pharmacist first.", ASKS, False),
    ],
)
def test_hands_over(turn: str, answer: str, handed: bool) -> None:
    assert hands_over(turn, asks_for_input(answer)) is handed


@pytest.mark.parametrize(
    ("turn", "answer", "moved"),
    [
        ("fine. hxg4", "25. g4\n\nI aim to gain more space. What is your response?", True),
        ("2. Bf1-c4", "As black, I respond with:\n\n1... e7-e5\n\nNow it's your turn again.", True),
        ("look for a weapon", "The door creaks open behind you. What do you do?", True),
        # a move is a few words, not a question; an answer that hands over no move
        ("I think I'd open with the queen's pawn and then see", "Your move.", False),
        ("what are the rules?", "Your move.", False),
        ("hxg4", "That line wins a pawn for White.", False),
        ("Thank you.", "I look forward to your response.", False),
    ],
)
def test_a_move_after_an_answer_that_hands_it_over(turn: str, answer: str, moved: bool) -> None:
    assert makes_move(turn, invites_move(answer)) is moved


def test_a_move_in_a_story_is_genuine_by_gate(judge: OfflineJudge) -> None:
    """No word of "look for a weapon" is in the answer; the model alone calls it a new
    task (P 0.18). The answer's "What do you do?" is what makes it a reply."""
    messages = (
        {"role": "user", "content": "Let's play a text adventure. I wake up in a dark cave."},
        {"role": "assistant", "content": "Water drips somewhere ahead, and footsteps echo "
         "behind you. There is a sense of urgency in the air. What do you do?"},
    )  # fmt: skip
    [verdict] = judge.judge([JudgeInput("r", messages, "look for a weapon")])
    assert (verdict.genuine, verdict.label) == (True, "plausible_followup")
    assert "makes the move the answer handed over" in verdict.rationale


def test_a_one_word_move_passes_the_surface_gate(judge: OfflineJudge) -> None:
    """One word is degenerate by the surface gate's count, unless the answer asked for it;
    the same word after an answer that hands over no move stays degenerate."""
    play = "Sure! Let's play tic-tac-toe. Do you want to play as X or O?"
    facts = "Tic-tac-toe is a game for two players on a three-by-three grid."
    turns = [
        JudgeInput(str(i), ({"role": "user", "content": "Let's play a game"},
                            {"role": "assistant", "content": a}), "X")
        for i, a in enumerate((play, facts))
    ]  # fmt: skip
    moved, not_asked = judge.judge(turns)
    assert (moved.genuine, moved.label) == (True, "plausible_followup")
    assert "makes the move" in moved.rationale
    assert (not_asked.genuine, not_asked.label) == (False, "degenerate_short")


def test_a_reply_to_what_the_answer_asked_is_genuine_by_gate(judge: OfflineJudge) -> None:
    messages = (
        {"role": "user", "content": "Can you help me write a cover letter?"},
        {"role": "assistant", "content": "Of course. Could you tell me about your degree?"},
    )
    turn = "I hold a Bachelor of Science in Computer Science from Anytown University."
    [verdict] = judge.judge([JudgeInput("r", messages, turn)])
    assert (verdict.genuine, verdict.label) == (True, "plausible_followup")
    assert "hands over what the answer asked for" in verdict.rationale
