"""Agreement numbers against scikit-learn and scipy on constructed inputs, and the
``agree`` / ``export labels`` commands on label files and on a real run store.

Run: ``.venv/bin/python -m pytest tests/test_agree.py -q`` (~10 s).
"""

from __future__ import annotations

import json
import random
import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score, confusion_matrix

from userturn.analysis.agree import (
    LabelRow,
    agreement,
    bootstrap_kappa,
    disagreement_slice,
    kappa_interval,
)
from userturn.cli import main
from userturn.rundir.records import UserTurnRecord
from userturn.rundir.store import Store
from userturn.types import LABELS, Judgment

CELLS = ["m1|gsm8k|T=0.0|none", "m1|gsm8k|T=1.0|none", "m2|gsm8k|T=0.0|none", "m2|gsm8k|T=1.0|none"]


def _label(genuine: bool, rng: random.Random) -> str:
    return "plausible_followup" if genuine else rng.choice(LABELS[:6])


def constructed(seed: int = 3) -> tuple[dict[str, LabelRow], dict[str, LabelRow]]:
    """A: 120 rows; B: the same ids minus 7, plus 4 of its own; ~20% flips, some not ok."""
    rng = random.Random(seed)
    a, b = {}, {}
    for i in range(120):
        cell = CELLS[i % 4]
        g = rng.random() < 0.15 + 0.2 * (i % 4)
        a[f"u{i}"] = LabelRow(f"u{i}", g, _label(g, rng), "ok", cell=cell)
        if i < 7:
            continue
        gb = g if rng.random() < 0.8 else not g
        lb = a[f"u{i}"].label if gb == g and rng.random() < 0.7 else _label(gb, rng)
        status = "unparseable" if i % 17 == 0 else "ok"
        b[f"u{i}"] = LabelRow(
            f"u{i}",
            gb if status == "ok" else None,
            lb if status == "ok" else None,
            status,
            cell=cell,
        )
    a["u8"] = LabelRow("u8", None, None, "error", cell=CELLS[0])
    for j in range(4):
        b[f"x{j}"] = LabelRow(f"x{j}", True, "plausible_followup", "ok", cell=CELLS[1])
    return a, b


def test_numbers_match_sklearn_and_scipy() -> None:
    a, b = constructed()
    res = agreement(a, b, reps=200, seed=1)
    ids = [i for i in a if i in b and a[i].ok and b[i].ok]
    ga, gb = [a[i].genuine for i in ids], [b[i].genuine for i in ids]
    la, lb = [a[i].label for i in ids], [b[i].label for i in ids]
    assert res["n"] == len(ids) and len(ids) > 90
    assert res["agreement"] == pytest.approx(np.mean(np.array(ga) == np.array(gb)))
    assert res["kappa"] == pytest.approx(cohen_kappa_score(ga, gb))
    assert res["label_agreement"] == pytest.approx(np.mean(np.array(la) == np.array(lb)))
    assert res["label_kappa"] == pytest.approx(cohen_kappa_score(la, lb))
    assert res["confusion"]["matrix"] == confusion_matrix(ga, gb, labels=[True, False]).tolist()
    labels = res["label_confusion"]["labels"]
    assert res["label_confusion"]["matrix"] == confusion_matrix(la, lb, labels=labels).tolist()
    lo, hi = res["kappa_ci"]
    assert lo < res["kappa"] < hi
    assert (lo, hi) == kappa_interval(ga, gb, reps=200, seed=1)  # reproducible
    b_lo, b_hi = bootstrap_kappa(ga, gb, reps=200, seed=1)
    assert b_lo is not None and b_hi is not None and lo <= b_lo and hi >= b_hi  # a union
    not_ok = sum(1 for i in a if i in b and not (a[i].ok and b[i].ok))
    assert res["dropped_detail"] == {
        "not_ok": not_ok,
        "not_ok_a": 1,
        "not_ok_b": not_ok - 1,
        "only_in_a": 7,
        "only_in_b": 4,
    }
    assert res["dropped"] == not_ok + 11


def test_bootstrap_by_hand_with_sklearn() -> None:
    a, b = constructed()
    ids = [i for i in a if i in b and a[i].ok and b[i].ok]
    ga, gb = np.array([a[i].genuine for i in ids]), np.array([b[i].genuine for i in ids])
    rng = np.random.default_rng(5)
    draws = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(300):
            idx = rng.integers(0, len(ids), len(ids))
            draws.append(cohen_kappa_score(ga[idx], gb[idx], labels=[False, True]))
    expected = (np.percentile(draws, 2.5), np.percentile(draws, 97.5))
    assert bootstrap_kappa(list(ga), list(gb), reps=300, seed=5) == pytest.approx(expected)


def test_per_cell_rates_use_each_sides_own_rows() -> None:
    a, b = constructed()
    cells = agreement(a, b, reps=0)["per_cell"]
    assert [c["cell"] for c in cells["cells"]] == sorted(CELLS)
    ra = [np.mean([r.genuine for r in a.values() if r.ok and r.cell == c]) for c in sorted(CELLS)]
    rb = [np.mean([r.genuine for r in b.values() if r.ok and r.cell == c]) for c in sorted(CELLS)]
    assert [c["rate_a"] for c in cells["cells"]] == pytest.approx(ra)
    assert cells["pearson"] == pytest.approx(stats.pearsonr(ra, rb)[0])
    assert cells["spearman"] == pytest.approx(stats.spearmanr(ra, rb)[0])


def test_degenerate_inputs_give_none_not_nan() -> None:
    same = {f"i{k}": LabelRow(f"i{k}", False, "new_task_prompt", "ok") for k in range(5)}
    res = agreement(same, same, reps=50)
    assert res["agreement"] == 1.0 and res["kappa"] is None and res["kappa_ci"] == [None, None]
    assert res["per_cell"] is None
    empty = agreement({}, same, reps=50)
    assert empty["n"] == 0 and empty["kappa"] is None and empty["dropped"] == 5


def test_disagreement_slice() -> None:
    a, b = constructed()
    rows = disagreement_slice(a, b)
    assert rows and all(r["a"] != r["b"] for r in rows)
    assert sum(r["sigma_differs"] for r in rows) == agreement(a, b, reps=0)["disagreements"]


def _write(path: Path, rows: dict[str, LabelRow]) -> Path:
    with path.open("w") as f:
        for r in rows.values():
            f.write(
                json.dumps(
                    {
                        "id": r.id,
                        "genuine_followup": r.genuine,
                        "label": r.label,
                        "rationale": "",
                        "status": r.status,
                        "cell": r.cell,
                    }
                )
                + "\n"
            )
    return path


def test_cli_json_contract_and_disagreements(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = constructed()
    fa, fb = _write(tmp_path / "a.jsonl", a), _write(tmp_path / "b.jsonl", b)
    out = tmp_path / "dis.jsonl"
    assert (
        main(
            ["agree", str(fa), str(fb), "--json", "--bootstrap", "100", "--disagreements", str(out)]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    for key in (
        "n",
        "dropped",
        "agreement",
        "kappa",
        "kappa_ci",
        "label_agreement",
        "label_kappa",
        "confusion",
    ):
        assert key in res
    assert res["kappa"] == pytest.approx(agreement(a, b, reps=0)["kappa"])
    assert len(out.read_text().splitlines()) == len(disagreement_slice(a, b))
    (tmp_path / "bad.jsonl").write_text('{"id": "1", "status": "ok", "label": "nice"}\n')
    assert main(["agree", str(fa), str(tmp_path / "bad.jsonl")]) == 2


def make_run(root: Path, a: dict[str, LabelRow], b: dict[str, LabelRow]) -> Path:
    """A real run store with two judges' verdicts on the same user turns."""
    store = Store(root / "store.sqlite")
    for i, row in enumerate(a.values()):
        model, dataset, temp, pert = row.cell.split("|")
        store.put_user_turn(
            UserTurnRecord(
                key=row.id,
                answer_key="ans",
                item_id=f"item{i}",
                model=model,
                dataset=dataset,
                config="",
                temperature=float(temp[2:]),
                sample=0,
                seed=None,
                perturbation=pert,
                messages=({"role": "user", "content": "q"},),
                user_turn="u",
            )
        )
        for judge, rows in (("rules", a), ("llm:openai:m", b)):
            r = rows.get(row.id)
            if r is not None:
                store.put_judgment(
                    row.id,
                    Judgment(judge, r.genuine, r.label, "", r.status, version="1"),  # type: ignore[arg-type]
                )
    store.close()
    return root


def test_agree_in_a_run_and_export_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = constructed()
    run = make_run(tmp_path / "run", a, b)
    judge_b = "openai:m?base_url=http://127.0.0.1:1/v1"  # as typed; ids drop transport
    assert (
        main(
            [
                "agree",
                "--run",
                str(run),
                "--judges",
                f"rules,{judge_b}",
                "--json",
                "--bootstrap",
                "0",
            ]
        )
        == 0
    )
    in_run = json.loads(capsys.readouterr().out)
    fa, fb = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    assert main(["export", "labels", "--run", str(run), "--judge", "rules", "--out", str(fa)]) == 0
    assert main(["export", "labels", "--run", str(run), "--judge", judge_b, "--out", str(fb)]) == 0
    capsys.readouterr()
    line = json.loads(fa.read_text().splitlines()[0])
    assert set(line) == {"id", "genuine_followup", "label", "rationale", "status", "cell"}
    assert main(["agree", str(fa), str(fb), "--json", "--bootstrap", "0"]) == 0
    from_files = json.loads(capsys.readouterr().out)
    expected = agreement(a, {k: v for k, v in b.items() if k in a}, reps=0)
    for res in (in_run, from_files):
        assert res["n"] == expected["n"] and res["kappa"] == pytest.approx(expected["kappa"])
        assert res["per_cell"]["pearson"] == pytest.approx(expected["per_cell"]["pearson"])
    assert main(["agree", "--run", str(run), "--judges", "rules,nope"]) == 2


def test_agree_across_two_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = constructed()
    run1 = make_run(tmp_path / "r1", a, b)
    renamed = {
        f"z{k}": LabelRow(f"z{k}", r.genuine, r.label, r.status, cell=r.cell) for k, r in b.items()
    }
    run2 = make_run(tmp_path / "r2", renamed, renamed)
    assert (
        main(
            [
                "agree",
                "--run",
                str(run1),
                "--run",
                str(run2),
                "--judges",
                "rules",
                "--json",
                "--bootstrap",
                "0",
            ]
        )
        == 0
    )
    res = json.loads(capsys.readouterr().out)
    assert res["n"] == 0  # different user turns: nothing matches by id ...
    assert len(res["per_cell"]["cells"]) == 4  # ... but cells still compare
    assert res["per_cell"]["pearson"] == pytest.approx(
        agreement(a, renamed, reps=0)["per_cell"]["pearson"]
    )


def test_cell_names_keep_rollout_turns_apart() -> None:
    """``agree --by cell`` must not pool rollout turn 2 with the probe at the same T."""
    from dataclasses import replace

    from userturn.analysis.agree import cell_name

    base = UserTurnRecord(
        key="k",
        answer_key="a",
        item_id="i",
        model="m",
        dataset="d",
        config="c1",
        temperature=1.0,
        sample=0,
        seed=None,
        perturbation="none",
        messages=({"role": "user", "content": "q"},),
        user_turn="u",
    )
    names = {
        cell_name(base),
        cell_name(replace(base, probe="rollout", turn=1)),
        cell_name(replace(base, probe="rollout", turn=2)),
    }
    assert len(names) == 3 and cell_name(base) == "m|d|T=1.0|none|config=c1"


def test_kappa_interval_does_not_collapse_on_three_ids(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Three ids that agree: every bootstrap resample agrees too, and the bootstrap alone
    said κ 1.000 [1.000, 1.000]. The Wilson floor keeps the interval honest about n=3,
    and the output names the method."""
    rows = [("a", True), ("b", False), ("c", True)]
    path = tmp_path / "a.jsonl"
    path.write_text(
        "".join(
            json.dumps({"id": i, "genuine_followup": g, "label": _label(g, random.Random(0))})
            + "\n"
            for i, g in rows
        )
    )
    assert main(["agree", str(path), str(path), "--format", "json", "--bootstrap", "200"]) == 0
    res = json.loads(capsys.readouterr().out)
    lo, hi = res["kappa_ci"]
    assert res["kappa"] == 1.0 and hi == 1.0 and lo < 0.0
    assert res["kappa_ci_method"] == "bootstrap+wilson-floor"
    assert bootstrap_kappa([True, False, True], [True, False, True], reps=200) == (1.0, 1.0)
    assert main(["agree", str(path), str(path), "--bootstrap", "200"]) == 0
    text = capsys.readouterr().out
    assert f"1.000 [{lo:.3f}, 1.000]" in text and "bootstrap+wilson-floor" in text
