"""Rollouts: the same weights play both sides for N user turns.

Run: ``.venv/bin/python -m pytest tests/run/test_rollout.py -q``. The logic tests use the
scripted ``fake:`` backend (milliseconds); one test plays N=3 on the embedded model and
kills the process with SIGKILL in the middle of turn 3, then resumes (about a minute).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from userturn.backends.fake import REQUESTS
from userturn.cli import main
from userturn.config import build_config
from userturn.errors import UserError
from userturn.run.driver import run
from userturn.rundir.store import Store

QUESTION_TURN = "Why is it 42? Could you show the steps?"


def _cfg(**over: object) -> object:
    base = {
        "models": ["fake:r"],
        "datasets": ["gsm8k"],
        "limit": 2,
        "temperatures": [1.0],
        "samples": 2,
        "turns": 3,
        "judges": ["offline"],
        "probe": "rollout",
    }
    return build_config({**base, **over})


def test_each_step_extends_the_conversation_under_the_user_role(tmp_path: Path) -> None:
    REQUESTS.pop("r", None)
    res = run(_cfg(), tmp_path / "r")  # type: ignore[arg-type]
    with Store(tmp_path / "r" / "store.sqlite") as store:
        turns = list(store.user_turns(probe="rollout"))
    assert len(turns) == 2 * 2 * 3 and {t.turn for t in turns} == {1, 2, 3}
    by_conv: dict[tuple[str, int], list] = {}
    for t in turns:
        by_conv.setdefault((t.item_id, t.sample), []).append(t)
    for conv in by_conv.values():
        conv.sort(key=lambda t: t.turn)
        for prev, nxt in itertools.pairwise(conv):
            # turn t+1 sees turn t's text as the user's message, then an assistant reply
            assert list(nxt.messages[: len(prev.messages)]) == list(prev.messages)
            assert nxt.messages[len(prev.messages)] == {
                "role": "user",
                "content": prev.user_turn.strip(),
            }
            assert nxt.messages[len(prev.messages) + 1]["role"] == "assistant"
    reqs = REQUESTS["r"]
    assert {r.role for r in reqs} == {"user", "assistant"}
    user_reqs = [r for r in reqs if r.role == "user"]
    # each user prompt is the previous assistant prompt's continuation: prefix reuse
    assert all(r.prompt.endswith("<|im_start|>user\n") for r in user_reqs)
    cells = [c for c in res.cells if c.probe == "rollout"]
    assert sorted(c.turn for c in cells) == [1, 2, 3]
    assert all(c.survival is not None for c in cells)
    survival = [c.survival for c in sorted(cells, key=lambda c: c.turn or 0)]
    assert survival == sorted(survival, reverse=True)  # survival never rises


def test_stop_on_degenerate_ends_a_conversation(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"user": ["<|im_start|>assistant"]}))  # a template leak
    run(
        _cfg(models=[f"fake:stop?script={script}"], stop_on="degenerate"),  # type: ignore[arg-type]
        tmp_path / "r",
    )
    with Store(tmp_path / "r" / "store.sqlite") as store:
        turns = list(store.user_turns(probe="rollout"))
    assert {t.turn for t in turns} == {1}  # every conversation stopped after turn 1


def test_best_of_keeps_the_most_genuine_candidate_and_records_all(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"user": ["ok", QUESTION_TURN, "<|im_end|> <|im_end|>"]}))
    cfg = _cfg(
        models=[f"fake:best?script={script}"],
        best_of=4,
        turns=1,
        samples=1,
        judges=["offline", "rules"],
    )
    res = run(cfg, tmp_path / "r")  # type: ignore[arg-type]
    with Store(tmp_path / "r" / "store.sqlite") as store:
        turns = list(store.user_turns(probe="rollout"))
        verdicts = store.judgments()
    for t in turns:
        assert t.candidates is not None and len(t.candidates) == 4
        chosen = [c for c in t.candidates if c["chosen"]]
        assert len(chosen) == 1 and chosen[0]["text"] == t.user_turn
        best = max(c["probability"] for c in t.candidates)
        assert chosen[0]["probability"] == best
        offline = next(v for v in verdicts[t.key] if v.judge == "offline")
        assert offline.probability == pytest.approx(best)
        assert {v.judge for v in verdicts[t.key]} == {"offline", "rules"}
    _assert_selected_cells_are_not_corrected(res.cells, "offline")


def _assert_selected_cells_are_not_corrected(cells: list, selector: str) -> None:
    """Every best-of cell names its selector and has no corrected rate; the selector's
    own cell says it is biased upward."""
    rollout = [c for c in cells if c.probe == "rollout"]
    assert rollout and all(c.selected_by == selector for c in rollout)
    for c in rollout:
        assert c.rate_corrected is None and c.gf_at_k_corrected is None
        assert c.correction_note is not None and "not corrected" in c.correction_note
        assert ("biased upward" in c.correction_note) == (c.judge == selector)


def test_a_single_judge_best_of_is_refused_unless_another_judge_selects(
    tmp_path: Path,
) -> None:
    """One judge cannot both choose the best-of turns and score them: refused, unless
    ``select_judge`` names another judge to choose (then it judges, the other scores)."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"user": ["ok", QUESTION_TURN]}))
    model = f"fake:sel?script={script}"
    with pytest.raises(UserError) as err:
        run(_cfg(models=[model], best_of=2, turns=1), tmp_path / "a")  # type: ignore[arg-type]
    assert err.value.field == "best_of" and "--select-judge" in str(err.value)
    with pytest.raises(UserError):
        cfg = _cfg(models=[model], best_of=2, turns=1, select_judge="offline")
        run(cfg, tmp_path / "a")  # type: ignore[arg-type]
    cfg = _cfg(models=[model], best_of=2, turns=1, judges=["rules"], select_judge="offline")
    res = run(cfg, tmp_path / "b")  # type: ignore[arg-type]
    _assert_selected_cells_are_not_corrected(res.cells, "offline")
    assert {c.judge for c in res.cells} == {"offline", "rules"}


def test_an_unparseable_verdict_leaves_survival_instead_of_ending_it(tmp_path: Path) -> None:
    """Survival's denominator follows the cell policy: a conversation whose turn is
    unparseable has an unknown state from then on, not "not survived"."""
    from userturn.analysis.cells import summary_cells
    from userturn.types import Judgment

    script = tmp_path / "s.json"
    script.write_text(json.dumps({"user": [QUESTION_TURN]}))
    out = tmp_path / "r"
    run(_cfg(models=[f"fake:unp?script={script}"], turns=2), out)  # type: ignore[arg-type]
    with Store(out / "store.sqlite") as store:
        turns = sorted(store.user_turns(probe="rollout"), key=lambda t: (t.turn, t.item_id))
        version = store.judgments()[turns[0].key][0].version
        for t in turns:  # every turn genuine, so every conversation survives
            good = Judgment("offline", True, "plausible_followup", "", version=version)
            store.put_judgment(t.key, good)
        before = {c.turn: c for c in summary_cells(store) if c.probe == "rollout"}
        bad = Judgment("offline", None, None, "no verdict", status="unparseable")
        store.put_judgment(turns[0].key, replace(bad, version=version))
        after = {c.turn: c for c in summary_cells(store) if c.probe == "rollout"}
    assert before[1].survival == 1.0 and before[2].survival == 1.0  # every turn genuine
    assert after[1].survival == 1.0 and after[2].survival == 1.0  # not 3/4
    assert after[1].unparseable == 1
    assert after[1].survival_null is not None
    assert after[2].survival_null == pytest.approx(after[1].survival_null ** 2)


@pytest.mark.parametrize(
    ("over", "field"),
    [
        ({"temperatures": [0.7, 1.0]}, "temperatures"),
        ({"perturbations": ["none", "truncate:0.5"]}, "perturbations"),
        ({"temperatures": [0.0], "best_of": 2}, "best_of"),
    ],
)
def test_a_grid_the_rollout_cannot_play_is_refused(
    tmp_path: Path, over: dict[str, object], field: str
) -> None:
    """Taking the first temperature or perturbation silently would mislabel the cells."""
    with pytest.raises(UserError) as err:
        run(_cfg(**over), tmp_path / "r")  # type: ignore[arg-type]
    assert err.value.field == field and not (tmp_path / "r").exists()


def test_the_rollout_command_samples_at_one_user_temperature(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No temperature given: T=1.0; ``--user-temperature=T`` and ``--user-temperature T``
    both set it."""
    base = ["rollout", "--model", "fake:x", "--limit", "1", "--turns", "1", "--dry-run"]
    assert main(base) == 0
    assert "at T=1.0" in capsys.readouterr().out
    assert main([*base, "--user-temperature=0.7"]) == 0
    assert "at T=0.7" in capsys.readouterr().out
    two = ["--judge", "offline", "--judge", "rules"]
    assert main([*base, "--user-temperature", "0.5", "--best-of", "2", *two]) == 0
    assert "at T=0.5" in capsys.readouterr().out
    assert main([*base, "--temperatures", "0,1"]) == 2


def test_likelihood_on_a_dataset_without_real_turns_is_refused(tmp_path: Path) -> None:
    argv = ["likelihood", "--model", "fake:x", "--dataset", "gsm8k", "--limit", "2"]
    assert main([*argv, "--out", str(tmp_path / "r")]) == 2
    assert not (tmp_path / "r").exists()


def test_rollout_on_the_embedded_model_resumes_after_sigkill(tmp_path: Path) -> None:
    out = tmp_path / "r"
    cmd = [sys.executable, "-c", _SCRIPT, str(out)]
    proc = subprocess.Popen(cmd, start_new_session=True)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if _turns(out, 3) >= 1:  # a conversation has reached turn 3: kill mid-run
            break
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    stored = _count(out)
    assert 0 < stored < 2 * 3, "the kill should land mid-run"
    res = run(_embedded_cfg(), out)  # type: ignore[arg-type]
    assert res.stats.reused == stored  # nothing lost
    with Store(out / "store.sqlite") as store:
        keys = [t.key for t in store.user_turns()]
    assert len(keys) == len(set(keys)) == 2 * 3  # nothing duplicated


def _embedded_cfg() -> object:
    return build_config(
        {
            "models": ["smollm2-135m"],
            "datasets": ["gsm8k"],
            "limit": 2,
            "temperatures": [1.0],
            "turns": 3,
            "judges": ["offline"],
            "probe": "rollout",
            "max_answer_tokens": 24,
            "max_user_tokens": 16,
        }
    )


_SCRIPT = f"""
import sys
from pathlib import Path
sys.path.insert(0, {str(Path(__file__).parent)!r})
from test_rollout import _embedded_cfg
from userturn.run.driver import run
run(_embedded_cfg(), Path(sys.argv[1]))
"""


def _count(out: Path) -> int:
    if not (out / "store.sqlite").exists():
        return 0
    with Store(out / "store.sqlite") as store:
        return store.count_user_turns()


def _turns(out: Path, turn: int) -> int:
    if not (out / "store.sqlite").exists():
        return 0
    try:
        with Store(out / "store.sqlite") as store:
            return sum(t.turn == turn for t in store.user_turns())
    except Exception:
        return 0
