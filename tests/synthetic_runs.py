"""Synthetic run directories for analysis/report/compare tests, built with the real Store.

Not a test module: imported by tests/test_analysis.py, test_tables.py, test_plots.py,
test_compare.py, test_loading.py and test_report_browser.py. Outcomes are deterministic
functions of (model, item, T, sample, perturbation), so tests can compute the expected
numbers independently of userturn.analysis.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from userturn.run.outputs import write_outputs
from userturn.rundir.keys import content_key
from userturn.rundir.records import AnswerRecord, UserTurnRecord
from userturn.rundir.store import STORE_NAME, Store
from userturn.types import Judgment

Outcome = Callable[[str, int, float, int, str], tuple[str, bool | None, str | None]]
"""(model, item index, T, sample, perturbation) -> (status, genuine, label)."""

CONFIG = "synthetic"
EVIL = "</script><script>window.__pwned = 1</script><b>bold?</b> & <|im_end|>"


def default_outcome(
    model: str, i: int, t: float, s: int, pert: str
) -> tuple[str, bool | None, str | None]:
    """Rates rise with T; truncation raises them; a few unparseable verdicts."""
    if i == 0 and s == 1:
        return "unparseable", None, None
    bump = 1 if pert.startswith("truncate") else 0
    shift = len(model) % 3 + int(t * 10) // 4
    genuine = (i + s + shift + bump) % 3 == 0 if t > 0 else bump == 1 and i % 2 == 0
    label = (
        "plausible_followup"
        if genuine
        else ("previous_turn_restate" if model.startswith("qwen") else "assistant_turn_restate")
    )
    return "ok", genuine, label


@dataclass
class Spec:
    models: dict[str, str] = field(
        default_factory=lambda: {"qwen-a": "qwen", "smollm-b": "smollm", "llama-c": "llama"}
    )
    datasets: tuple[str, ...] = ("gsm8k", "chat")
    """The second dataset is held-out (not scored)."""
    items: int = 6
    temps: tuple[float, ...] = (0.0, 0.7, 1.0)
    k: int = 3
    perts: tuple[str, ...] = ("none", "truncate:0.5")
    judges: tuple[str, ...] = ("rules",)
    outcome: Outcome = default_outcome
    correct: Callable[[str, int], bool] = lambda m, i: (i * len(m)) % 4 != 0


def build_run(out: Path, spec: Spec | None = None, write: bool = True) -> Path:
    """Fill ``out/store.sqlite`` with the grid in ``spec``; optionally write the exports."""
    spec = spec or Spec()
    out.mkdir(parents=True, exist_ok=True)
    store = Store(out / STORE_NAME)
    try:
        for model, fam in spec.models.items():
            for ds in spec.datasets:
                for i in range(spec.items):
                    _item(store, spec, model, fam, ds, i)
        if write:
            write_outputs(out, store)
    finally:
        store.close()
    return out


def _item(store: Store, spec: Spec, model: str, fam: str, ds: str, i: int) -> None:
    item = f"{ds}-{i}"
    scored = ds == spec.datasets[0]
    akey = content_key(model, item, "answer")
    answer = f"The answer is {i}. " + (EVIL if i == 1 else "Step one, step two, step three.")
    store.put_answer(
        AnswerRecord(
            key=akey,
            item_id=item,
            dataset=ds,
            model=model,
            config=CONFIG,
            text=answer,
            final=answer,
            finish="length" if i == 2 else "stop",
            correct=spec.correct(model, i) if scored else None,
        )
    )
    for pert in spec.perts:
        for t in spec.temps:
            for s in range(1 if t == 0 else spec.k):
                key = content_key(model, item, pert, t, s)
                ctx: list[dict[str, Any]] = [
                    {"role": "user", "content": f"Question {i} <tag>?"},
                    {
                        "role": "assistant",
                        "content": answer[: len(answer) // 2] if pert != "none" else answer,
                    },
                ]
                store.put_user_turn(
                    UserTurnRecord(
                        key=key,
                        answer_key=akey,
                        item_id=item,
                        model=model,
                        dataset=ds,
                        config=CONFIG,
                        temperature=t,
                        sample=s,
                        seed=s,
                        perturbation=pert,
                        messages=tuple(ctx),
                        family=fam,
                        user_finish="stop",
                        user_turn=EVIL if i == 1 else f"Why {i}? ({model}, T={t}, s={s})",
                    )
                )
                for judge in spec.judges:
                    status, genuine, label = spec.outcome(model, i, t, s, pert)
                    store.put_judgment(
                        key,
                        Judgment(judge, genuine, label, f"{judge} says <{label}>", status),  # type: ignore[arg-type]
                    )
