"""Unit tests of the worker on the scripted ``fake:`` backend (milliseconds each).

Run: ``.venv/bin/python -m pytest tests/run/test_worker.py -q``. What the probe *asks*
the model for (the role, one seed per sample, the plan of samples) is only visible
here; the real-model tests in tests/test_pipeline.py check the same stages end to end.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from userturn.backends import load_backend
from userturn.backends.fake import REQUESTS
from userturn.config import build_config
from userturn.datasets import Dataset, load_dataset
from userturn.errors import UserError
from userturn.run.events import AnswerEvent, Event, UserEvent
from userturn.run.probes.base import Known
from userturn.run.probes.generate import UserTurnStage
from userturn.run.worker import ItemWorker
from userturn.rundir.keys import derive_seed
from userturn.rundir.records import AnswerRecord
from userturn.types import Item

DATE = dt.date(2026, 1, 2)


def _items(n: int = 2) -> list[Item]:
    return [
        Item(f"q{i}", "jsonl:x", ({"role": "user", "content": f"What is {i}+{i}?"},))
        for i in range(n)
    ]


def _worker(name: str, **cfg: object) -> ItemWorker:
    REQUESTS.pop(name, None)
    backend = load_backend(f"fake:{name}" + str(cfg.pop("query", "")))
    return ItemWorker(backend, build_config({"models": [f"fake:{name}"], **cfg}), DATE, "cfg1")


def _process(
    worker: ItemWorker,
    items: list[Item],
    ds: Dataset,
    answers: dict[str, AnswerRecord] | None = None,
    done: set[str] | None = None,
) -> list[Event]:
    """The generation probe's stage over one chunk, as an executor runs it."""
    known = Known(answers or {}, done or set())
    return list(UserTurnStage(worker).process(items, ds, known, items))


def _events(worker: ItemWorker, items: list[Item]) -> list[Event]:
    return _process(worker, items, load_dataset("jsonl:unused.jsonl"))


def test_user_turns_are_asked_for_in_the_user_role_with_one_seed_per_sample() -> None:
    worker = _worker("roles", temperatures=[0.0, 1.0], samples=3)
    events = _events(worker, _items(2))
    reqs = REQUESTS["roles"]
    assert [r.role for r in reqs[:2]] == ["assistant", "assistant"]
    user = [r for r in reqs if r.role == "user"]
    # per item: one greedy request with one seed, one T=1 request carrying k=3 seeds
    assert [(r.params.temperature, len(r.seeds)) for r in user] == [(0.0, 1), (1.0, 3)] * 2
    t1 = next(r for r in user if r.params.temperature == 1.0)
    assert list(t1.seeds) == [derive_seed(0, "q0", 1.0, i) for i in range(3)]
    assert len(set(t1.seeds)) == 3
    turns = [e.record for e in events if isinstance(e, UserEvent)]
    assert len(turns) == 2 * (1 + 3) and all(e.generated for e in events[2:])


def test_the_user_prompt_ends_with_the_user_header_after_the_answer() -> None:
    worker = _worker("prompt", temperatures=[0.0])
    _events(worker, _items(1))
    answer_req, user_req = REQUESTS["prompt"]
    assert answer_req.prompt.endswith("<|im_start|>assistant\n")
    assert user_req.prompt == answer_req.prompt + "The answer is 42.<|im_end|>\n<|im_start|>user\n"
    assert "<|im_end|>" in user_req.params.stop


def test_known_answers_and_done_turns_make_no_request() -> None:
    worker = _worker("resume", temperatures=[0.0, 1.0], samples=2)
    first = _events(worker, _items(2))
    known = {e.record.key: e.record for e in first if isinstance(e, AnswerEvent)}
    done = {e.record.key for e in first if isinstance(e, UserEvent)}
    REQUESTS["resume"].clear()
    again = _process(worker, _items(2), load_dataset("jsonl:u.jsonl"), known, done)
    assert REQUESTS["resume"] == []
    assert not any(e.generated for e in again) and len(again) == len(first)


def test_keys_change_with_the_config_and_the_dataset() -> None:
    a = _events(_worker("keys"), _items(1))
    other = ItemWorker(load_backend("fake:keys"), build_config({}), DATE, "cfg2")
    b = _process(other, _items(1), load_dataset("jsonl:u.jsonl"))
    other_ds = [Item("q0", "gsm8k", _items(1)[0].messages)]
    c = _events(_worker("keys"), other_ds)
    keys = [{e.record.key for e in evs} for evs in (a, b, c)]
    assert not keys[0] & keys[1] and not keys[0] & keys[2]


def test_an_answer_cut_inside_reasoning_has_no_final_answer(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"assistant": ["<think>\\nlet me count " + "very " * 40]}))
    tpl = tmp_path / "t.jinja"
    tpl.write_text(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\\n{{ m['content'] }}<|im_end|>\\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\\n<think>\\n{% endif %}"
    )
    worker = _worker(
        "think",
        query=f"?script={script}",
        chat_template=str(tpl),
        max_answer_tokens=8,
        temperatures=[0.0],
    )
    ds = load_dataset("gsm8k")
    item = ds.load_first(1)[0]
    (answer, *_) = _process(worker, [item], ds)
    assert isinstance(answer, AnswerEvent)
    rec = answer.record
    assert rec.finish == "length_in_reasoning" and rec.final == "" and rec.correct is False
    assert rec.truncated and rec.incomplete_reasoning


def test_a_backend_that_cannot_write_raw_text_is_refused_at_startup() -> None:
    backend = load_backend("fake:caps")
    backend.capabilities = type(backend.capabilities)(raw_completion=False)
    with pytest.raises(UserError, match="cannot write a user turn"):
        ItemWorker(backend, build_config({}), DATE, "c")
