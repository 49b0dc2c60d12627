"""``inject-error``: a plausible wrong final answer, on real GSM8K items (their own worked
solutions, answers in SmolLM2's style, and answers the embedded SmolLM2 writes now), on
the GPQA fixture rows, and end to end through ``userturn run`` on the scripted fake
backend.

Run: ``.venv/bin/python -m pytest tests/perturb/test_inject_error.py -q`` (1-3 minutes:
most of it SmolLM2 writing three short answers).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from userturn.cli import main
from userturn.datasets import load_dataset
from userturn.errors import UserError
from userturn.perturb import load_perturbation
from userturn.perturb.inject_numeric import final_occurrences, occurrences, wrong_values
from userturn.scoring.multiple_choice import extract_letter
from userturn.scoring.numeric import extract_number, gold_number
from userturn.types import DETAIL_APPLIED, Item, PerturbationDetail

GPQA_CSV = Path(__file__).parents[1] / "datasets" / "fixtures" / "gpqa_diamond.csv"
INJECT = load_perturbation("inject-error")
NUM = re.compile(r"\d+(?:[.,]\d+)*")
DETAIL_KEYS = {"applied", "version", "kind", "original", "injected", "gold", "seed"}
DECLARED = set(PerturbationDetail.__annotations__)


@pytest.fixture(scope="module")
def gsm_items() -> list[Item]:
    return load_dataset("gsm8k").load_first(4)


@pytest.fixture(scope="module")
def gpqa_items() -> list[Item]:
    return load_dataset(f"gpqa:{GPQA_CSV}").load()


def gold_of(item: Item) -> Decimal:
    assert item.reference is not None
    return gold_number(str(item.reference["answer"]))


def smollm_style(item: Item, value: Decimal) -> str:
    """An answer shaped like SmolLM2-135M's: restated question numbers, steps, the
    result stated twice, sometimes with GSM8K's ``####``."""
    question = str(item.messages[-1]["content"])
    numbers = NUM.findall(question)[:2] or ["3", "4"]
    return (
        "To solve this problem, we need to find the total.\n\n"
        f"Step 1: We know that {numbers[0]} and {numbers[-1]} are given.\n"
        f"Step 2: So the total is {value}.\n\n"
        f"Therefore, the answer is {value}.\n\n#### {value}"
    )


def assert_consistent(before: str, after: str, detail: dict[str, Any], gold: Decimal) -> None:
    """The conclusion's statements of the original final number, and nothing else, became
    the injected one, exactly as ``changes`` records; earlier mentions (premises,
    intermediate values) stay and are counted as ``kept``; the scorer reads the injected
    one; it is neither gold nor original."""
    original, injected = Decimal(detail["original"]), Decimal(detail["injected"])
    assert injected not in (original, gold)
    assert extract_number(after) == injected
    assert NUM.sub("#", before) == NUM.sub("#", after)  # text and number formats kept
    pairs = list(zip(NUM.findall(before), NUM.findall(after), strict=True))
    changed = [(a, b) for a, b in pairs if a != b]
    assert len(changed) == detail["occurrences"] > 0
    for a, b in changed:
        assert Decimal(a.replace(",", "")) == original
        assert Decimal(b.replace(",", "")) == injected
    assert len(occurrences(after, original)) == detail["kept"]  # only earlier mentions left
    assert replay(before, detail["changes"]) == after  # the record says exactly what changed
    first = min(c["start"] for c in detail["changes"])
    assert all(m.start() < first for m in occurrences(before, original)[: detail["kept"]])


def replay(text: str, changes: list[dict[str, Any]]) -> str:
    """The original text with the recorded changes applied."""
    for c in sorted(changes, key=lambda c: -c["start"]):
        assert text[c["start"] : c["end"]] == c["old"]
        text = text[: c["start"]] + c["new"] + text[c["end"] :]
    return text


# numeric: real GSM8K items ------------------------------------------------------------
def test_crafted_smollm2_style_answers_on_real_gsm8k_items(gsm_items: list[Item]) -> None:
    for item in gsm_items:
        gold = gold_of(item)
        for value in (gold, gold + 3):  # a correct answer and a wrong one
            answer = smollm_style(item, value)
            out = INJECT.perturb(answer, item, seed=11)
            assert out.detail is not None and out.detail["applied"], out.detail
            assert out.detail["original_correct"] is (value == gold)
            assert out.detail["gold"] == str(gold) and out.detail["kind"] == "numeric"
            assert_consistent(answer, out.text, out.detail, gold)


@pytest.mark.parametrize("dataset", ["gsm8k", "gsm-symbolic?lang=deu"])
def test_every_reference_solution(dataset: str) -> None:
    """The datasets' own worked solutions (``... <<12+6=18>>18 ... #### 18``) are real
    answers with the final number stated several times, inside calculator markup too."""
    for item in load_dataset(dataset).load():
        assert item.reference is not None
        solution = str(item.reference["answer"])
        out = INJECT.perturb(solution, item, seed=len(item.id))
        assert out.detail is not None and out.detail["applied"], (item.id, out.detail)
        assert out.detail["original_correct"] is True
        assert_consistent(solution, out.text, out.detail, gold_of(item))


@pytest.fixture(scope="module")
def smollm2_answers(gsm_items: list[Item]) -> list[tuple[Item, str]]:
    """Three answers written now by the embedded SmolLM2 (greedy, short)."""
    from userturn.backends import load_backend
    from userturn.backends.base import TemplateOptions
    from userturn.chat import answer_prompt, derive_markers
    from userturn.types import GenRequest, SamplingParams

    backend = load_backend("smollm2-135m?n_threads=2")
    tpl = backend.template(TemplateOptions(date=dt.date(2026, 1, 1)))
    params = SamplingParams(max_tokens=64, stop=derive_markers(tpl).answer_stops(tpl), seed=0)
    items = gsm_items[:3]
    reqs = [GenRequest(answer_prompt(tpl, list(it.messages)), "assistant", params) for it in items]
    results = backend.generate(reqs)
    backend.close()
    return [(it, r.completions[0].text) for it, r in zip(items, results, strict=True)]


def test_real_smollm2_answers(smollm2_answers: list[tuple[Item, str]]) -> None:
    applied = 0
    for item, answer in smollm2_answers:
        out = INJECT.perturb(answer, item, seed=5)
        assert out.detail is not None and DETAIL_KEYS <= set(out.detail)
        final = extract_number(answer)
        if final is not None and final_occurrences(answer, final):
            assert out.detail["applied"], (answer, out.detail)
            assert_consistent(answer, out.text, out.detail, gold_of(item))
            applied += 1
        else:  # said so, never pretended (a final number only in a premise, as "1/2" of
            # the question's speed, stays: changing it would rewrite the question)
            assert not out.detail["applied"] and out.detail["reason"] and out.text == answer
    assert applied >= 1, [a for _, a in smollm2_answers]


@pytest.mark.parametrize(
    ("answer", "injected_shape"),
    [
        ("Total: $1,694.00\nSo she paid $1,694.00.", r"\$\d,\d{3}\.00"),
        ("It is 12.5 km, so \\boxed{12.5}", r"\d+\.5\b|\d+\.\d\b"),
        ("The answer is \\$2{,}500.", r"\\\$\d\{,\}\d{3}"),
        ("x = -7, so the answer is -7.", r"-\d\b"),
    ],
)
def test_each_occurrence_keeps_its_own_format(
    gsm_items: list[Item], answer: str, injected_shape: str
) -> None:
    out = INJECT.perturb(answer, gsm_items[0], seed=3)
    assert out.detail is not None and out.detail["applied"], out.detail
    assert len(re.findall(injected_shape, out.text)) == out.detail["occurrences"] >= 1
    assert extract_number(out.text) == Decimal(out.detail["injected"])


def test_whole_tokens_only_and_step_labels_kept(gsm_items: list[Item]) -> None:
    answer = (
        "1. Start with 180 apples and 1.8 kg.\nStep 18: in 2,018 she adds 18 more.\n"
        "Not 18,5 kg (decimal comma) nor 3,18.\nThe answer is 18."
    )
    out = INJECT.perturb(answer, gsm_items[0], seed=1)
    assert out.detail is not None and out.detail["occurrences"] == 1
    for kept in ("1. Start", "180 apples", "1.8 kg", "Step 18:", "2,018", "18,5", "3,18"):
        assert kept in out.text
    assert " 18 more" in out.text and not out.text.endswith("is 18.")  # a premise stays
    assert out.detail["kept"] == 1


def test_premises_and_intermediate_values_equal_to_the_answer_are_kept(
    gsm_items: list[Item],
) -> None:
    """Only the conclusion changes: the premise "12 apples" and the operand 12 stay, the
    computed result and its statements after it change (the first version rewrote every
    12, so the answer contradicted its own question)."""
    answer = (
        "Tom has 12 apples. He gives away 3 and buys 3 more: 12 - 3 + 3 = 12 apples.\n"
        "So he has 12 apples.\n#### 12"
    )
    out = INJECT.perturb(answer, gsm_items[0], seed=1)
    assert out.detail is not None and out.detail["applied"]
    new = out.detail["injected"]
    assert out.text == (
        f"Tom has 12 apples. He gives away 3 and buys 3 more: 12 - 3 + 3 = {new} apples.\n"
        f"So he has {new} apples.\n#### {new}"
    )
    assert out.detail["kept"] == 2 and out.detail["occurrences"] == 3
    assert [c["old"] for c in out.detail["changes"]] == ["12", "12", "12"]
    assert replay(answer, out.detail["changes"]) == out.text


def test_one_paragraph_answer_keeps_its_premises(gsm_items: list[Item]) -> None:
    """Sentences, not only lines, separate premises from the conclusion."""
    answer = (
        "Janet's ducks lay 16 eggs. She has 16 - 3 - 4 = 9 left. She sells them for $2: "
        "9 * 2 = $18. The answer is 18."
    )
    out = INJECT.perturb(answer, gsm_items[0], seed=2)
    assert out.detail is not None and out.detail["applied"]
    assert out.text.startswith("Janet's ducks lay 16 eggs. She has 16 - 3 - 4 = 9 left.")
    assert "9 * 2 = $18" not in out.text and out.text.endswith(f"is {out.detail['injected']}.")


def test_seeded_deterministic_and_never_gold(gsm_items: list[Item]) -> None:
    item = gsm_items[1]
    gold = gold_of(item)
    answer = smollm_style(item, gold)
    runs = [INJECT.perturb(answer, item, seed=s) for s in range(60)]
    again = [INJECT.perturb(answer, item, seed=s) for s in range(60)]
    assert [r.text for r in runs] == [r.text for r in again]
    injected = {Decimal(r.detail["injected"]) for r in runs if r.detail}
    assert len(injected) > 3 and gold not in injected
    # a wrong answer next to the gold: the gold is never drawn
    assert gold not in wrong_values(gold + 1, gold) and gold + 1 not in wrong_values(gold + 1, gold)


@pytest.mark.parametrize(
    ("original", "gold"),
    [("18", "18"), ("5", "5"), ("1", "2"), ("0", "0"), ("694", "694"), ("0.75", "1"), ("-7", "3")],
)
def test_wrong_values_keep_sign_and_magnitude(original: str, gold: str) -> None:
    o = Decimal(original)
    values = wrong_values(o, Decimal(gold))
    assert values and o not in values and Decimal(gold) not in values
    assert all((v > 0) == (o >= 0) for v in values)
    if o != 0:
        assert all(v.adjusted() == o.adjusted() for v in values)
    assert all(v.as_tuple().exponent == o.as_tuple().exponent for v in values)


# multiple choice: GPQA fixture rows ---------------------------------------------------
def test_gpqa_letter_and_option_text_replaced(gpqa_items: list[Item]) -> None:
    for item in gpqa_items:
        ref = item.reference
        assert ref is not None
        options, gold = ref["options"], ref["gold"]
        g = "ABCD".index(gold)
        listing = "\n".join(f"{c}) {o}" for c, o in zip("ABCD", options, strict=True))
        answer = (
            f"A careful reading of the options:\n{listing}\n\n"
            f"The correct option is {gold}, {options[g]}, as computed.\n\nAnswer: {gold}"
        )
        out = INJECT.perturb(answer, item, seed=2)
        d = out.detail
        assert d is not None and d["applied"] and d["kind"] == "multiple_choice", d
        assert d["original"] == gold and d["original_correct"] is True
        new = d["injected"]
        assert new != gold and extract_letter(out.text, options) == new
        assert d["injected_text"] == options["ABCD".index(new)]
        assert out.text.startswith(f"A careful reading of the options:\n{listing}")  # kept
        assert f"option is {new}, {d['injected_text']}, as computed" in out.text
        assert out.text.endswith(f"Answer: {new}")


def test_gpqa_wrong_answer_gets_another_wrong_one(gpqa_items: list[Item]) -> None:
    item = gpqa_items[1]
    assert item.reference is not None
    gold = item.reference["gold"]
    wrong = next(c for c in "ABCD" if c != gold)
    for seed in range(30):
        out = INJECT.perturb(
            f"I first thought ({wrong.lower()}) fits. Answer: ({wrong})", item, seed
        )
        assert out.detail is not None and out.detail["applied"]
        assert out.detail["injected"] not in (gold, wrong)
        assert out.detail["original_correct"] is False
    same = [INJECT.perturb(f"Answer: {wrong}", item, 7).text for _ in range(3)]
    assert len(set(same)) == 1


def test_gpqa_option_text_alone_and_its_case(gpqa_items: list[Item]) -> None:
    item = gpqa_items[1]  # options are words: "Nitrogen", "Carbon dioxide", ...
    assert item.reference is not None
    gold = item.reference["options"]["ABCD".index(item.reference["gold"])]
    answer = f"Most of the air is {gold.lower()}.\n{gold}"  # no letter: the last line
    out = INJECT.perturb(answer, item, seed=6)
    d = out.detail
    assert d is not None and d["applied"] and d["original_text"] == gold, d
    new = d["injected_text"]
    assert out.text == f"Most of the air is {new[0].lower() + new[1:]}.\n{new}"


def test_letters_inside_option_texts_are_kept(gpqa_items: list[Item]) -> None:
    base = gpqa_items[1]
    options = ["Vitamin C", "Vitamin D", "Iron", "Zinc"]
    item = Item(base.id, base.dataset, base.messages, {"gold": "C", "options": options})
    answer = "Vitamin C helps, Vitamin D too, but iron is key: C.\nAnswer: C"
    out = INJECT.perturb(answer, item, seed=0)
    d = out.detail
    assert d is not None and d["applied"] and d["original"] == "C", d
    new = d["injected"]
    assert out.text.startswith("Vitamin C helps, Vitamin D too")  # no letter edited inside
    assert out.text.endswith(f": {new}.\nAnswer: {new}")


def test_gpqa_article_a_and_lowercase_letters(gpqa_items: list[Item]) -> None:
    item = gpqa_items[0]
    assert item.reference is not None
    item = Item(item.id, item.dataset, item.messages, {**item.reference, "gold": "B"})
    answer = "A ball falls. A is tempting, but (a) ignores g.\nSo the answer is (a)."
    out = INJECT.perturb(answer, item, seed=4)
    d = out.detail
    assert d is not None and d["applied"] and d["original"] == "A"
    new = d["injected"]
    # the article stays; so does the discussion of option A, only the conclusion changes
    head = "A ball falls. A is tempting, but (a) ignores g.\n"
    assert out.text == f"{head}So the answer is ({new.lower()})."
    assert d["kept"] == 2 and replay(answer, d["changes"]) == out.text


def _mc(item: Item, answer: str, seed: int = 3) -> tuple[str, dict[str, Any]]:
    """The injected answer and its detail, checked against the record: replaying the
    recorded changes on the original gives the injected answer, and the scorer reads
    the injected letter."""
    assert item.reference is not None
    out = INJECT.perturb(answer, item, seed)
    d = out.detail
    assert d is not None and d["applied"] and d["kind"] == "multiple_choice", d
    assert replay(answer, d["changes"]) == out.text
    assert extract_letter(out.text, item.reference["options"]) == d["injected"]
    return out.text, d


def test_mc_discussion_of_the_chosen_option_is_kept(gpqa_items: list[Item]) -> None:
    """Only the statements that conclude the choice change; the reasoning that discusses
    the chosen option (its letter and its text) stays, so the answer reads as a wrong
    pick (the first version rewrote "Option C (Nitrogen) makes up ..." too)."""
    item = gpqa_items[1]  # gold C, Nitrogen
    answer = (
        "Option C (Nitrogen) makes up about 78% of dry air, far more than the others.\n"
        "Therefore the answer is C.\n\nAnswer: C"
    )
    text, d = _mc(item, answer)
    new = d["injected"]
    assert text == (
        "Option C (Nitrogen) makes up about 78% of dry air, far more than the others.\n"
        f"Therefore the answer is {new}.\n\nAnswer: {new}"
    )
    assert d["occurrences"] == 2 and d["kept"] == 2
    assert [c["old"] for c in d["changes"]] == ["C", "C"]


def test_mc_options_quoted_as_premises_are_kept(gpqa_items: list[Item]) -> None:
    """The options restated inline, and the question's quantities, are premises; the
    line that selects the option changes, letter and text together."""
    item = gpqa_items[1]
    assert item.reference is not None
    options = item.reference["options"]
    premise = f"The options are {', '.join(options)}. Dry air is mostly one gas."
    answer = f"{premise}\nNitrogen is 78% of it, so the answer is C."
    text, d = _mc(item, answer, seed=1)
    new, new_text = d["injected"], d["injected_text"]
    assert text == f"{premise}\n{new_text} is 78% of it, so the answer is {new}."
    assert d["kept"] == 1 and d["occurrences"] == 2


def test_mc_the_computing_line_changes_and_the_premises_stay(gpqa_items: list[Item]) -> None:
    """A numeric option (GPQA's "20 m"): the line that computes it ends on it and
    changes; the question's numbers and an earlier mention of the option stay."""
    item = gpqa_items[0]  # gold B, 20 m
    answer = (
        "It falls for 2 s from rest; 20 m is the figure to check.\n"
        "d = g t^2 / 2 = 10 * 4 / 2 = 20 m\n"
        "\\boxed{B}"
    )
    text, d = _mc(item, answer, seed=0)
    new, new_text = d["injected"], d["injected_text"]
    assert text == (
        "It falls for 2 s from rest; 20 m is the figure to check.\n"
        f"d = g t^2 / 2 = 10 * 4 / 2 = {new_text}\n\\boxed{{{new}}}"
    )
    assert d["kept"] == 1


def test_mc_an_answer_after_its_reasons_keeps_them(gpqa_items: list[Item]) -> None:
    """Reasons given after the final answer discuss the option and stay as written."""
    item = gpqa_items[1]
    answer = "Answer: C\n\nNitrogen is about 78% of dry air by volume."
    text, d = _mc(item, answer, seed=2)
    assert text == f"Answer: {d['injected']}\n\nNitrogen is about 78% of dry air by volume."
    assert d["kept"] == 1 and d["occurrences"] == 1


def test_mc_a_lone_final_statement_takes_the_line_that_selected_it(
    gpqa_items: list[Item],
) -> None:
    """Reasons between the selecting line and a lone final statement stay; the selecting
    line changes with it, so the answer does not pick two options."""
    item = gpqa_items[1]
    answer = "C is right. Nitrogen dominates the atmosphere.\n\\boxed{C}"
    text, d = _mc(item, answer, seed=5)
    new = d["injected"]
    assert text == f"{new} is right. Nitrogen dominates the atmosphere.\n\\boxed{{{new}}}"
    assert d["kept"] == 1 and d["occurrences"] == 2


def test_mc_the_statement_the_scorer_reads_changes_too(gpqa_items: list[Item]) -> None:
    """With no letter the scorer trusts more, it reads the option's text on the last
    line; that statement changes with the final one, or the injection would not hold."""
    item = gpqa_items[1]
    text, d = _mc(item, "I think it's C. Nitrogen is most of air.", seed=3)
    assert text == f"I think it's {d['injected']}. {d['injected_text']} is most of air."
    assert d["kept"] == 0 and d["occurrences"] == 2


def test_mc_the_line_that_picks_the_option_by_name_changes(gpqa_items: list[Item]) -> None:
    """ "= 21, which is option C." selects the option: it changes with "Answer: C"; the
    operands stay (GPQA's numeric options: 21 is option C's text)."""
    item = gpqa_items[2]  # gold C, 21
    text, d = _mc(item, "3 * 7 = 21, which is option C.\nAnswer: C", seed=4)
    new, new_text = d["injected"], d["injected_text"]
    assert text == f"3 * 7 = {new_text}, which is option {new}.\nAnswer: {new}"
    assert d["kept"] == 0 and d["occurrences"] == 3


def test_rewrite_repeats_the_swap_in_the_reasoning(
    gsm_items: list[Item], gpqa_items: list[Item]
) -> None:
    """Under ``--history-reasoning template`` the reasoning travels apart from the final
    answer; the same swap keeps the two consistent."""
    num = INJECT.perturb("The answer is 18.", gsm_items[0], seed=8)
    assert num.detail is not None
    reasoning = "9 * 2 = 18, and 18 + 0 = 18; 180 stays."
    i = num.detail["injected"]
    expected = f"9 * 2 = {i}, and {i} + 0 = {i}; 180 stays."
    assert INJECT.rewrite(reasoning, gsm_items[0], num.detail) == expected
    item = gpqa_items[1]
    assert item.reference is not None
    gold = item.reference["gold"]
    mc = INJECT.perturb(f"Answer: {gold}", item, seed=8)
    assert mc.detail is not None and mc.detail["applied"]
    think = f"So {mc.detail['original_text']}, i.e. option {gold}."
    new = INJECT.rewrite(think, item, mc.detail)
    assert new == f"So {mc.detail['injected_text']}, i.e. option {mc.detail['injected']}."
    skipped = INJECT.perturb("no answer", gsm_items[0], seed=8)
    assert skipped.detail is not None
    assert INJECT.rewrite(reasoning, gsm_items[0], skipped.detail) == reasoning


# not applicable: said so, text unchanged ----------------------------------------------
def _items(gsm: Item) -> list[tuple[str, Item, str]]:
    msgs = gsm.messages
    held = Item("h1", "sharegpt", (*msgs, {"role": "assistant", "content": "It is 18."}))
    return [
        ("held-out", held, "It is 18."),
        ("not scored", Item("m1", "mtbench", msgs), "The answer is 18."),
        ("single final", Item("i1", "ifeval", msgs, {"instruction_id_list": []}), "Done: 18."),
        ("states no number", gsm, "I am not sure how to solve this."),
        ("not a plain token", gsm, "The answer is \\boxed{\\frac{3}{4}}."),
        ("names no option", Item("g1", "gpqa", msgs, {"gold": "A", "options": list("wxyz")}), "?"),
    ]


def test_not_applicable_cases_are_recorded(gsm_items: list[Item]) -> None:
    for name, item, answer in _items(gsm_items[0]):
        out = INJECT.perturb(answer, item, seed=0)
        d = out.detail
        assert d is not None and DETAIL_KEYS <= set(d), name
        assert d["applied"] is False and d["reason"] and d["version"] == INJECT.version, name
        assert out.text == answer and d["injected"] is None, name


def test_every_detail_written_is_a_declared_perturbation_detail(
    gsm_items: list[Item], gpqa_items: list[Item]
) -> None:
    """The writer and the readers share one typed detail: inject-error writes no key
    that ``PerturbationDetail`` does not declare, and always the ones readers rely on
    (the store's SQL reads ``DETAIL_APPLIED``)."""
    assert DETAIL_APPLIED in PerturbationDetail.__required_keys__
    cases = [(it, smollm_style(it, gold_of(it))) for it in gsm_items]
    cases += [(it, f"The answer is ({(it.reference or {})['gold']}).") for it in gpqa_items]
    cases += [(item, answer) for _, item, answer in _items(gsm_items[0])]
    applied = set()
    for item, answer in cases:
        d = INJECT.perturb(answer, item, seed=3).detail
        assert d is not None
        assert PerturbationDetail.__required_keys__ <= set(d) <= DECLARED, sorted(set(d) - DECLARED)
        applied.add(d[DETAIL_APPLIED])
        if d["kind"] == "multiple_choice" and d["applied"]:
            assert {"original_text", "injected_text"} <= set(d)
    assert applied == {True, False}


def test_spec_and_text_only_use() -> None:
    assert INJECT.id == "inject-error" and load_perturbation(INJECT.id).id == INJECT.id
    with pytest.raises(UserError, match="takes no argument"):
        load_perturbation("inject-error:3")
    with pytest.raises(NotImplementedError, match="perturb"):
        INJECT.apply("The answer is 18.")


# end to end ---------------------------------------------------------------------------
def test_run_stores_the_injection_in_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "script.json"
    answer = "We add them up: 5 + 13 = 18.\nSo the answer is 18 apples.\n#### 18"
    script.write_text(json.dumps({"assistant": [answer], "user": ["Are you sure about that?"]}))
    out = tmp_path / "run"
    flags = ["--model", f"fake:inj?script={script}", "--limit", "2", "--temperatures", "0"]
    perts = ["--perturb", "none", "--perturb", "inject-error"]
    assert main(["run", *flags, *perts, "--out", str(out)]) == 0
    capsys.readouterr()
    records = [json.loads(line) for line in (out / "records.jsonl").open()]
    by_pert = {p: [r for r in records if r["perturbation"] == p] for p in ("none", "inject-error")}
    assert len(by_pert["none"]) == len(by_pert["inject-error"]) == 2
    assert all(r["perturbation_detail"] is None for r in by_pert["none"])
    for rec in by_pert["inject-error"]:
        d = rec["perturbation_detail"]
        assert d["applied"] and d["original"] == "18" and d["version"] == INJECT.version
        shown = rec["messages"][-1]["content"]
        assert extract_number(shown) == Decimal(d["injected"]) and "18" not in NUM.findall(shown)
        assert rec["answer"] == answer  # the raw answer is kept as generated
    assert main(["run", *flags, *perts, "--out", str(out)]) == 0  # resumes: same keys
    again = [json.loads(line) for line in (out / "records.jsonl").open()]
    assert [r["messages"] for r in again] == [r["messages"] for r in records]


def test_a_final_number_only_in_a_premise_is_not_replaced(gsm_items: list[Item]) -> None:
    """A cut-off answer whose last number is the question's "1/2": nothing states a
    result, so nothing is injected (the first version rewrote the question's fraction)."""
    answer = "She skips at 1/2 the speed of running. So, we set up an equation:\n\nTime ="
    out = INJECT.perturb(answer, gsm_items[0], seed=5)
    assert out.detail is not None and not out.detail["applied"]
    assert "premise" in out.detail["reason"] and out.text == answer
