"""Export and import of annotation packets on a Store-API run (real SQLite, no model).

Covers what the packet may hold (blinding at the file level), where the key goes, seeded
order, planted duplicates, the refusal cases as one-line CLI errors, and import: label
files in the `userturn agree` format, duplicate consistency and inter-annotator κ.

Run: ``.venv/bin/python -m pytest tests/annotate/test_annotate_packet.py -q``
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from annotate_helpers import MARKERS, SECOND_JUDGE, build_store_run
from sklearn.metrics import cohen_kappa_score

from userturn.annotate import ExportOptions, export_packet, import_annotations
from userturn.annotate.db import AnnotationDB
from userturn.cli import main
from userturn.errors import UserError
from userturn.rundir.store import STORE_NAME, Store
from userturn.types import Judgment


def export(run: Path, out: Path, *args: str) -> dict[str, Any]:
    assert main(["annotate", "export", "--run", str(run), "--out", str(out), *args]) == 0
    return json.loads(Path(str(out) + ".key.json").read_text())


def packet_lines(packet: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (packet / "examples.jsonl").read_text().splitlines()]


def test_packet_holds_only_context_and_user_turn(store_run: Path, tmp_path: Path) -> None:
    packet = tmp_path / "packet"
    key = export(store_run, packet, "--n", "6", "--duplicates", "2", "--seed", "7")
    assert sorted(p.name for p in packet.iterdir()) == ["examples.jsonl", "packet.json"]
    lines = packet_lines(packet)
    assert len(lines) == 8 and len(key["examples"]) == 8
    for line in lines:
        assert set(line) == {"id", "messages", "user_turn"}
        assert all(set(m) == {"role", "content"} for m in line["messages"])
        assert re.fullmatch(r"[0-9a-f]{10}", line["id"])
    blob = "".join(p.read_text() for p in packet.iterdir())
    hidden = (*MARKERS, "rules", "genuine_followup", '"rationale"', '"judge"', "stratum")
    assert [m for m in hidden if m in blob] == []
    record_ids = {e["record_id"] for e in key["examples"]}
    assert not any(line["id"] in rid for line in lines for rid in record_ids)


def test_disagreement_sampling_uses_the_share(store_run: Path, tmp_path: Path) -> None:
    key = export(
        store_run,
        tmp_path / "p",
        "--n",
        "6",
        "--disagreement-share",
        "0.5",
        "--judges",
        f"rules,{SECOND_JUDGE}",
        "--duplicates",
        "0",
    )
    assert Counter(e["stratum"] for e in key["examples"]) == {"disagreement": 3, "agreement": 3}
    assert key["judges"] == ["rules", SECOND_JUDGE] and key["disagreement_share"] == 0.5
    # store_run's second judge flips every third record: records 0, 3, 6, 9 disagree
    dis = {e["record_id"] for e in key["examples"] if e["stratum"] == "disagreement"}
    assert all(int(r[:4]) * 2 + int(r[4:8]) in (0, 3, 6, 9) for r in dis)


def test_seed_fixes_the_sample_and_order(store_run: Path, tmp_path: Path) -> None:
    def order(name: str, seed: str) -> list[str]:
        key = export(
            store_run, tmp_path / name, "--n", "8", "--seed", seed, "--sampling", "prevalence"
        )
        return [e["record_id"] for e in key["examples"]]

    first, again, other = order("a", "1"), order("b", "1"), order("c", "2")
    assert first == again and first != other
    ids_a = {x["id"] for x in packet_lines(tmp_path / "a")}
    assert ids_a.isdisjoint({x["id"] for x in packet_lines(tmp_path / "b")})  # random ids


def test_duplicates_point_back_to_an_earlier_showing(store_run: Path, tmp_path: Path) -> None:
    key = export(
        store_run, tmp_path / "p", "--n", "12", "--duplicates", "3", "--sampling", "prevalence"
    )
    ex = key["examples"]
    pos = {e["id"]: i for i, e in enumerate(ex)}
    dups = [e for e in ex if e["duplicate_of"]]
    assert len(dups) == 3 and len({e["record_id"] for e in ex}) == 12
    for d in dups:
        orig = ex[pos[d["duplicate_of"]]]
        assert orig["record_id"] == d["record_id"] and pos[orig["id"]] < pos[d["id"]]
        assert orig["duplicate_of"] is None


def cli_error(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    capsys.readouterr()
    assert main(list(args)) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err
    return err


def test_refusals_are_one_line_errors(
    store_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["annotate", "export", "--run", str(store_run)]
    packet = str(tmp_path / "p")
    assert "outside the packet" in cli_error(
        capsys, *base, "--out", packet, "--key", f"{packet}/key.json"
    )
    assert "no judgments" in cli_error(capsys, *base, "--out", packet, "--judges", "rules,x")
    assert "needs two judges" in cli_error(capsys, *base, "--out", packet, "--judges", "rules")
    assert "only applies" in cli_error(
        capsys, *base, "--out", packet, "--sampling", "prevalence", "--judges", "rules"
    )
    assert "not a run directory" in cli_error(
        capsys, "annotate", "export", "--run", str(tmp_path), "--out", packet
    )
    assert "unknown sampling" in cli_error(capsys, *base, "--out", packet, "--sampling", "x")
    assert "not an annotation packet" in cli_error(capsys, "annotate", "serve", packet)
    export(store_run, Path(packet), "--n", "2")
    assert "not empty" in cli_error(capsys, *base, "--out", packet)
    assert "key file exists" in cli_error(
        capsys, *base, "--out", str(tmp_path / "q"), "--key", f"{packet}.key.json"
    )


def test_no_decided_record_is_an_error(tmp_path: Path) -> None:
    run = tmp_path / "run"
    keys = build_store_run(run, n_items=2, samples=1)
    store = Store(run / STORE_NAME)
    for key in keys:  # the second judge's output could not be parsed anywhere
        store.put_judgment(key, Judgment(SECOND_JUDGE, None, None, "?", "unparseable"))
    store.close()
    with pytest.raises(UserError, match="nothing to annotate"):
        export_packet(run, tmp_path / "p", ExportOptions())
    res = export_packet(run, tmp_path / "q", ExportOptions(sampling="prevalence"))
    assert (res.examples, res.duplicates) == (4, 2)  # 2 records, each planted again


def annotate(packet: Path, who: str, labels: dict[str, tuple[bool, str]]) -> None:
    db = AnnotationDB.in_packet(packet)
    for ex_id, (genuine, label) in labels.items():
        db.save(who, ex_id, genuine, label, f"note by {who}")
    db.close()


def test_import_writes_agree_label_files(
    store_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packet = tmp_path / "p"
    key = export(store_run, packet, "--n", "10", "--duplicates", "2", "--seed", "3")
    ex = key["examples"]
    truth = {
        e["record_id"]: (i % 3 != 0, "plausible_followup" if i % 3 else "other")
        for i, e in enumerate(e for e in ex if not e["duplicate_of"])
    }
    alice = {e["id"]: truth[e["record_id"]] for e in ex}
    first_dup = next(e for e in ex if e["duplicate_of"])
    alice[first_dup["id"]] = (not truth[first_dup["record_id"]][0], "new_task_prompt")
    bob = {
        e["id"]: (truth[e["record_id"]][0] if i % 4 else not truth[e["record_id"]][0], "other")
        for i, e in enumerate(ex[:7])
        if not e["duplicate_of"]
    }
    annotate(packet, "alice", alice)
    annotate(packet, "Bob Ü", bob)
    out = tmp_path / "labels"
    assert (
        main(["annotate", "import", str(packet), "--key", f"{packet}.key.json", "--out", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert re.search(r"inter-annotator (alice vs Bob Ü|Bob Ü vs alice): n \d", printed)
    assert "alice: 10 labelled, 0 not" in printed
    rows = [json.loads(x) for x in (out / "alice.jsonl").read_text().splitlines()]
    assert len(rows) == 10 and {r["id"] for r in rows} == set(truth)
    for r in rows:
        assert set(r) == {"id", "genuine_followup", "label", "rationale", "status"}
        assert (r["genuine_followup"], r["label"]) == truth[r["id"]]  # the first showing
        assert r["status"] == "ok" and r["rationale"] == "note by alice"
    summary = json.loads((out / "import_summary.json").read_text())["annotators"]
    a = next(s for s in summary if s["annotator"] == "alice")
    assert (a["duplicate_pairs"], a["sigma_consistency"], a["label_consistency"]) == (2, 0.5, 0.5)
    assert (out / "Bob_Ü.jsonl").is_file()
    pair = json.loads((out / "inter_annotator.json").read_text())["pairs"][0]
    common = sorted(set(truth) & {e["record_id"] for e in ex if e["id"] in bob})
    b_rows = {r["id"]: r for r in map(json.loads, (out / "Bob_Ü.jsonl").read_text().splitlines())}
    want = cohen_kappa_score(
        [truth[i][0] for i in common], [b_rows[i]["genuine_followup"] for i in common]
    )
    assert pair["n"] == len(common) == len(bob) and pair["kappa"] == pytest.approx(want)
    assert pair["label_agreement"] == pytest.approx(
        sum(truth[i][1] == "other" for i in common) / len(common)
    )


def test_import_checks_the_key_and_needs_annotations(store_run: Path, tmp_path: Path) -> None:
    export(store_run, tmp_path / "a", "--n", "2")
    export(store_run, tmp_path / "b", "--n", "2")
    with pytest.raises(UserError, match="nobody has annotated"):
        import_annotations(tmp_path / "a", tmp_path / "a.key.json", tmp_path / "out")
    annotate(tmp_path / "a", "x", {})
    with pytest.raises(UserError, match="key is for packet"):
        import_annotations(tmp_path / "a", tmp_path / "b.key.json", tmp_path / "out")
    with pytest.raises(UserError, match="no annotations yet"):
        import_annotations(tmp_path / "a", tmp_path / "a.key.json", tmp_path / "out")


def test_one_judge_run_falls_back_to_prevalence(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A default run has one judge: `annotate export` samples by prevalence and says so
    (explicit --sampling disagreement still refuses, in test_refusals...)."""
    run = tmp_path / "run"
    argv = ["run", "--model", "fake:x", "--limit", "3", "--temperatures", "0", "--judge", "rules"]
    assert main([*argv, "--out", str(run)]) == 0
    capsys.readouterr()
    key = export(run, tmp_path / "p", "--n", "2", "--duplicates", "0")
    out = capsys.readouterr().out
    assert "note: the run has 1 judge (rules), so the packet samples by prevalence" in out
    assert key["sampling"] == "prevalence" and key["judges"] == []
    assert {e["stratum"] for e in key["examples"]} == {"prevalence"}
