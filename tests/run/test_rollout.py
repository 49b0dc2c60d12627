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
from pathlib import Path

import pytest

from userturn.backends.fake import REQUESTS
from userturn.cli import main
from userturn.config import build_config
from userturn.errors import UserError
from userturn.run.rollout import run_rollouts
from userturn.run.store import Store

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
    res = run_rollouts(_cfg(), tmp_path / "r")  # type: ignore[arg-type]
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
    run_rollouts(
        _cfg(models=[f"fake:stop?script={script}"], stop_on="degenerate"),  # type: ignore[arg-type]
        tmp_path / "r",
    )
    with Store(tmp_path / "r" / "store.sqlite") as store:
        turns = list(store.user_turns(probe="rollout"))
    assert {t.turn for t in turns} == {1}  # every conversation stopped after turn 1


def test_best_of_keeps_the_most_genuine_candidate_and_records_all(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"user": ["ok", QUESTION_TURN, "<|im_end|> <|im_end|>"]}))
    run_rollouts(
        _cfg(models=[f"fake:best?script={script}"], best_of=4, turns=1, samples=1),  # type: ignore[arg-type]
        tmp_path / "r",
    )
    with Store(tmp_path / "r" / "store.sqlite") as store:
        turns = list(store.user_turns(probe="rollout"))
        verdicts = store.judgments()
    for t in turns:
        assert t.candidates is not None and len(t.candidates) == 4
        chosen = [c for c in t.candidates if c["chosen"]]
        assert len(chosen) == 1 and chosen[0]["text"] == t.user_turn
        best = max(c["probability"] for c in t.candidates)
        assert chosen[0]["probability"] == best
        assert verdicts[t.key][0].probability == pytest.approx(best)


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
        run_rollouts(_cfg(**over), tmp_path / "r")  # type: ignore[arg-type]
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
    assert main([*base, "--user-temperature", "0.5", "--best-of", "2"]) == 0
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
    res = run_rollouts(_embedded_cfg(), out)  # type: ignore[arg-type]
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
from userturn.run.rollout import run_rollouts
run_rollouts(_embedded_cfg(), Path(sys.argv[1]))
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
