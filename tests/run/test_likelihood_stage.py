"""The likelihood probe: candidates, records, cells, resume.

Run: ``.venv/bin/python -m pytest tests/run/test_likelihood.py -q`` (a few seconds; one
test scores real HealthBench contexts with the embedded model). The backends' scores
themselves are tested in tests/backends/test_likelihood.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from userturn.analysis.cells import likelihood_cells
from userturn.config import build_config
from userturn.run.driver import run
from userturn.run.likelihood import candidates, conditioned, opening, score_requests, unrelated
from userturn.run.likelihood_plan import (
    COUNTERFACTUALS,
    END_MARKER_SCORED,
    assistant_turn_prompt,
    copies_context,
    counterfactuals,
)
from userturn.rundir.records import Counterfactual, LikelihoodRecord, ScoredCandidate
from userturn.rundir.store import Store
from userturn.types import Item

CTX = [
    {"role": "user", "content": "My knee hurts after running. Should I worry?"},
    {
        "role": "assistant",
        "content": "Knee pain after running is common. Rest, ice it. See a doctor if it swells.",
    },
]


def _item(i: str, ref: str | None = "It swelled a bit, is that bad?") -> Item:
    return Item(i, "healthbench", tuple(CTX), reference_turn=ref)


def test_candidates_are_fixed_per_item_and_real_first() -> None:
    pool = [
        _item("a"),
        _item("b"),
        Item("c", "healthbench", ({"role": "user", "content": "Plan a trip to Rome."},)),
    ]
    got = candidates(_item("a"), CTX, pool)
    assert [k for k, _ in got] == [
        "real",
        "previous_turn_restate",
        "assistant_turn_restate",
        "new_task_prompt",
    ]
    assert got[0][1] == "It swelled a bit, is that bad?"
    assert got[1][1] == CTX[0]["content"]  # verbatim
    assert got[2][1] == "Knee pain after running is common."
    assert (
        got[3][1] == unrelated(_item("a"), pool) == "Plan a trip to Rome."
        or got[3][1] == CTX[0]["content"]
    )
    assert candidates(_item("a"), CTX, pool) == got  # deterministic
    assert candidates(_item("a", ref=None), CTX, pool) == []  # no real turn: not probed


def test_opening_is_the_first_sentence_capped() -> None:
    assert opening("First. Second.") == "First."
    assert len(opening("word " * 100).split()) == 40


def test_probe_on_the_embedded_model_writes_records_cells_and_resumes(tmp_path: Path) -> None:
    cfg = build_config(
        {
            "models": ["smollm2-135m"],
            "datasets": ["healthbench"],
            "limit": 3,
            "probe": "likelihood",
            "judges": [],
        }
    )
    res = run(cfg, tmp_path / "r")
    (cell,) = [c for c in res.cells if c.probe == "likelihood"]
    assert cell.judge is None and cell.temperature is None
    assert cell.n + cell.likelihood_excluded == 3 and cell.likelihood_version == "2"
    assert cell.preference_accuracy is not None and cell.margin is not None
    assert cell.pmi_share is not None and cell.pmi_mean_ci_low is not None
    assert cell.role_share is not None and cell.role_auc is not None
    assert cell.pmi_excess_share is not None
    lines = [json.loads(x) for x in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    assert len(lines) == 3 and all(x["probe"] == "likelihood" for x in lines)
    scored = [x for x in lines if not x["excluded"]]
    assert len(scored) == cell.n
    for x in scored:
        conds = {c["condition"] for c in x["candidates"]}
        assert conds == {"user", "assistant"} | {f"cf{i}" for i in range(len(x["counterfactuals"]))}
        # of 3 items: the item's own truncated answer and the one other item's answer (the
        # third item gives the unrelated request, so its answer is never a counterfactual)
        assert len(x["counterfactuals"]) == 2
        user = [c for c in x["candidates"] if c["condition"] == "user"]
        real = user[0]
        best = max(c["mean_logprob"] for c in user[1:])
        assert x["margin"] == pytest.approx(real["mean_logprob"] - best)
        assert x["prefers_real"] == (real["mean_logprob"] > best)
        assert all(c["n_tokens"] > 0 and c["logprob"] < 0 for c in x["candidates"])
        by = {(c["kind"], c["condition"]): c["logprob"] for c in x["candidates"]}
        assert x["role_real"] == pytest.approx(by[("real", "user")] - by[("real", "assistant")])
    assert res.stats.extra["likelihood_scored"] == 3
    again = run(cfg, tmp_path / "r")
    assert again.stats.model_calls == 0 and again.stats.extra["likelihood_reused"] == 3


# version 2: contrasts of the same text -------------------------------------------------
def _scored(kind: str, cond: str, logprob: float, n: int = 5) -> ScoredCandidate:
    return ScoredCandidate(kind, f"{kind} text", logprob, n, cond)  # type: ignore[arg-type]


def _v2(key: str, real_user: float, real_cf: float, copies: float) -> LikelihoodRecord:
    """A scored record whose copies are nearly free (``copies`` per token) and whose real
    turn is more likely under the real answer than under the counterfactuals."""
    cands = (
        _scored("real", "user", real_user),
        _scored("previous_turn_restate", "user", copies * 5),
        _scored("assistant_turn_restate", "user", copies * 5),
        _scored("new_task_prompt", "user", -40.0),
        *(c for i in range(3) for c in (
            _scored("real", f"cf{i}", real_cf), _scored("new_task_prompt", f"cf{i}", -40.5))),
        _scored("real", "assistant", real_user - 6.0),
        _scored("assistant_turn_restate", "assistant", copies * 5 + 2.0),
    )  # fmt: skip
    cfs = tuple(Counterfactual(f"other:{i}", "another answer") for i in range(3))
    return LikelihoodRecord(
        key, "a" + key, "item" + key, "m", "healthbench", "c", "none", tuple(CTX), cands,
        counterfactuals=cfs,
    )  # fmt: skip


def test_copies_do_not_win_the_headline_measures(tmp_path: Path) -> None:
    """Verbatim copies of the context are nearly free (-0.1 nats per token) and beat the
    real turn in the ranking in every context; the version 2 measures compare the real
    turn with itself, so they show its dependence on the answer and on the user role."""
    store = Store(tmp_path / "store.sqlite")
    for i in range(6):
        store.put_likelihood(_v2(str(i), real_user=-20.0 - i, real_cf=-24.0 - i, copies=-0.1))
    (cell,) = likelihood_cells(store)
    assert cell.preference_accuracy == 0.0  # the ranking favours copies
    assert cell.pmi_share == 1.0 and cell.pmi_mean == pytest.approx(4.0)
    assert cell.pmi_control_share == 1.0 and cell.pmi_excess_share == 0.0
    assert cell.role_share == 1.0 and cell.role_mean == pytest.approx(6.0)
    assert cell.role_auc == 1.0 and cell.likelihood_version == "2"
    store.close()


def test_a_reference_that_copies_a_context_turn_is_left_out_and_counted() -> None:
    assert copies_context("  my knee HURTS after running. should i worry? ", CTX)
    assert not copies_context("It swelled a bit, is that bad?", CTX)


def test_counterfactuals_are_the_same_answer_perturbed_then_other_items_seeded() -> None:
    others = [
        Item(f"o{i}", "healthbench", ({"role": "user", "content": "q"},
                                      {"role": "assistant", "content": f"Other answer {i}."}))
        for i in range(5)
    ]  # fmt: skip
    answer = "Knee pain after running is common. Rest, ice it. See a doctor if it swells."
    cfs = counterfactuals(_item("a"), answer, others)
    assert len(cfs) == COUNTERFACTUALS and cfs[0].source == "truncate:0.5"
    assert answer.startswith(cfs[0].text) and cfs[0].text != answer
    assert all(c.source.startswith("other:") for c in cfs[1:])
    assert counterfactuals(_item("a"), answer, list(reversed(others))) != ()
    assert counterfactuals(_item("a"), answer, others) == cfs  # fixed per item
    avoid = frozenset({cfs[1].source.removeprefix("other:")})
    again = counterfactuals(_item("a"), answer, others, avoid)
    assert all(c.source.removeprefix("other:") not in avoid for c in again)
    assert len(again) == COUNTERFACTUALS


def test_the_end_marker_is_not_scored_and_conditions_group_requests() -> None:
    cands = conditioned([("real", "R"), ("previous_turn_restate", "P"),
                         ("assistant_turn_restate", "A"), ("new_task_prompt", "N")], 2)  # fmt: skip
    prompts = {"user": "U", "cf0": "C0", "cf1": "C1", "assistant": "S"}
    reqs = score_requests(cands, prompts, "<|im_end|>")
    assert [r.prompt for r in reqs] == ["U", "S", "C0", "C1"]
    assert [r.continuations for r in reqs] == [("R", "P", "A", "N"), ("R", "A"), ("R", "N"),
                                               ("R", "N")]  # fmt: skip
    assert not END_MARKER_SCORED


@pytest.mark.parametrize(
    "name", ["Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja", "GLM-4.6.jinja"]
)
def test_assistant_header_prompt_differs_from_the_user_prompt_only_in_the_role(
    name: str,
) -> None:
    """Both prompts are the template's own rendering of the same context; they part only
    where the next turn's header starts."""
    from shared_files import SHARED
    from userturn.chat import derive_markers, user_turn_prompt
    from userturn.chat.template import ChatTemplate

    path = SHARED / "chat_templates" / name
    if not path.is_file():
        pytest.skip("shared/chat_templates not found")
    tpl = ChatTemplate(path.read_text(encoding="utf-8"), name)
    markers = derive_markers(tpl)
    user = user_turn_prompt(tpl, CTX, markers).prompt
    asst = assistant_turn_prompt(tpl, CTX, markers, user)
    assert asst is not None
    assert user.endswith(markers.user_header) and asst != user
    head = user[: -len(markers.user_header)]
    assert asst.startswith(head)
    header = asst[len(head) :]
    assert "assistant" in header or "model" in header, header


@pytest.mark.parametrize("name", ["google-gemma-2-2b-it.jinja", "Apertus-8B-Instruct.jinja"])
def test_a_template_without_a_second_assistant_turn_gets_no_role_contrast(name: str) -> None:
    """Gemma's template refuses two assistant turns in a row; Apertus' merges them into
    one: neither renders a new assistant turn, so there is nothing to contrast with."""
    from shared_files import SHARED
    from userturn.chat import derive_markers, user_turn_prompt
    from userturn.chat.template import ChatTemplate

    path = SHARED / "chat_templates" / name
    if not path.is_file():
        pytest.skip("shared/chat_templates not found")
    tpl = ChatTemplate(path.read_text(encoding="utf-8"), path.name)
    markers = derive_markers(tpl)
    user = user_turn_prompt(tpl, CTX, markers).prompt
    assert assistant_turn_prompt(tpl, CTX, markers, user) is None
    cands = conditioned([("real", "R"), ("previous_turn_restate", "P"),
                         ("assistant_turn_restate", "A"), ("new_task_prompt", "N")], 1,
                        assistant=False)  # fmt: skip
    assert {c.condition for c in cands} == {"user", "cf0"}


def test_dry_run_states_the_scored_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from userturn.cli import main

    args = ["likelihood", "--model", "smollm2-135m", "--dataset", "healthbench", "--limit", "2"]
    assert main([*args, "--out", str(tmp_path / "r"), "--dry-run"]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "scored: 24 continuations, about " in text and " tokens (" in text
    assert not (tmp_path / "r").exists()


def test_the_unrelated_request_s_item_is_never_a_counterfactual(tmp_path: Path) -> None:
    """Its answer would make the unrelated request the expected next turn (measured: -19
    nats under that answer against -70 under the real one), so the control's PMI would be
    about which counterfactuals were drawn, not about the answer."""
    from userturn.datasets import load_dataset

    cfg = build_config(
        {"models": ["fake:x"], "datasets": ["healthbench"], "limit": 6, "probe": "likelihood",
         "judges": []}
    )  # fmt: skip
    run(cfg, tmp_path / "r")
    lines = [json.loads(x) for x in (tmp_path / "r" / "records.jsonl").read_text().splitlines()]
    first_user = {
        it.id: next(str(m["content"]) for m in it.messages if m["role"] == "user")
        for it in load_dataset("healthbench").load()
    }
    checked = 0
    for x in lines:
        if x["excluded"]:
            continue
        unrelated_text = next(c["text"] for c in x["candidates"] if c["kind"] == "new_task_prompt")
        for cf in x["counterfactuals"]:
            if cf["source"].startswith("other:"):
                assert first_user[cf["source"].removeprefix("other:")] != unrelated_text
                checked += 1
    assert checked > 0
