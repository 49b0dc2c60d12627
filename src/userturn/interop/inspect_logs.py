"""``userturn export inspect``: a run as inspect_ai eval logs, so ``inspect view`` browses it.

One log per (model, dataset, probe) of the run: in a run of one probe, one log per
model × dataset. Each records.jsonl line becomes an :class:`~inspect_ai.log.EvalSample`:

- ``input``: the context up to the answer; ``messages``: the context, the answer (as the
  model saw it, perturbed or not) and the generated user turn (a user message with
  ``source="generate"``); ``output``: the user turn, which is what the model generated;
- ``scores``: one per judge with an ok verdict (1 genuine, 0 not; the label as the
  answer, the rationale as the explanation). A judge whose verdict is unparseable or
  errored gives no score on that sample, so no metric computed from the samples counts
  it as "not genuine"; the failed verdict stays in the sample's metadata;
- ``metadata``: item, temperature, sample, perturbation, config, turn, finish reasons.

The log's results hold userturn's own cell figures (rate and its CI, corrected rate) as
metrics named per cell, ``rate[T=0.7,none]``; the run's config and the judges' cards
are the log's metadata. The logs are built with inspect's own classes and written with
``write_eval_log``, so their format is inspect's, whatever version is installed.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import userturn
from userturn.analysis.cards import judge_cards
from userturn.analysis.cell import BY_PROBE, CellSummary, LikelihoodCell, RolloutCell
from userturn.analysis.views import analyze
from userturn.errors import UserError
from userturn.report import read_manifest
from userturn.rundir.lines import iter_records, line_record
from userturn.rundir.records import LikelihoodRecord
from userturn.rundir.store import open_run

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog, EvalSample, EvalScore
    from inspect_ai.model import ChatMessage

LIKELIHOOD_SCORER = "likelihood"
"""The score name of the likelihood probe (judge-free): 1 when the real turn wins."""


def _require_inspect() -> None:
    try:
        import inspect_ai  # noqa: F401
    except ImportError as exc:
        raise UserError(
            "inspect_ai is not installed: pip install 'userturn[inspect]'", field="inspect"
        ) from exc


@dataclass(frozen=True)
class Exported:
    path: Path
    model: str
    dataset: str
    probe: str
    samples: int


def cell_suffix(c: CellSummary, with_config: bool = False) -> str:
    """A cell's name inside one log: ``[T=0.7,none]``, with the turn for rollouts and
    the config fingerprint when the log holds several."""
    parts = [] if c.temperature is None else [f"T={c.temperature:g}"]
    parts.append(c.perturbation)
    if c.turn is not None:
        parts.append(f"turn={c.turn}")
    if with_config:
        parts.append(c.config)
    return "[" + ",".join(parts) + "]"


def _message(role: str, content: Any, **kw: Any) -> ChatMessage:
    from inspect_ai.model import ChatMessageAssistant, ChatMessageSystem, ChatMessageUser

    text = content if isinstance(content, str) else str(content)
    if role == "system":
        return ChatMessageSystem(content=text, **kw)
    if role == "assistant":
        return ChatMessageAssistant(content=text, **kw)
    return ChatMessageUser(content=text, **kw)


def _scores(rec: dict[str, Any]) -> dict[str, Any]:
    from inspect_ai.scorer import Score

    if line_record(rec) is LikelihoodRecord:
        if not rec.get("candidates"):  # a context left out (its real turn copies the context)
            return {}
        return {
            LIKELIHOOD_SCORER: Score(
                value=1 if rec.get("prefers_real") else 0,
                answer=max(rec["candidates"], key=lambda c: c["mean_logprob"])["kind"],
                metadata={"margin": rec.get("margin")},
            )
        }
    out = {}
    for j in rec.get("judgments") or []:
        if j.get("status") != "ok" or j.get("genuine_followup") is None:
            continue
        out[str(j["judge"])] = Score(
            value=1 if j["genuine_followup"] else 0,
            answer=j.get("label"),
            explanation=j.get("rationale") or None,
            metadata={
                k: j.get(k) for k in ("probability", "challenges_answer", "version") if k in j
            },
        )
    return out


def _sample(rec: dict[str, Any], index: int) -> EvalSample:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelOutput

    context = [_message(m["role"], m["content"], source="input") for m in rec["messages"]]
    answer_last = bool(context) and rec["messages"][-1]["role"] == "assistant"
    inp = context[:-1] if answer_last else context
    messages = list(context)
    output = ModelOutput(model=rec["model"])
    if line_record(rec) is not LikelihoodRecord:
        turn = rec.get("user_turn") or ""
        messages.append(_message("user", turn, source="generate"))
        output = ModelOutput.from_content(
            rec["model"],
            turn,
            stop_reason="max_tokens" if rec.get("user_finish") == "length" else "stop",
        )
    keep = (
        "id",
        "item_id",
        "probe",
        "config",
        "temperature",
        "sample",
        "seed",
        "perturbation",
        "turn",
        "answer_finish",
        "answer_truncated",
        "correct",
        "user_finish",
        "reference_turn",
        "judgments",
        "candidates",
        "margin",
        "prefers_real",
    )
    return EvalSample(
        id=str(rec["id"]),
        epoch=1,
        input=inp or "",
        target=str(rec.get("answer_gold") or rec.get("reference_turn") or ""),
        messages=messages,
        output=output,
        scores=_scores(rec) or None,
        metadata={k: rec.get(k) for k in keep if k in rec} | {"index": index},
    )


def _metrics(cells: list[CellSummary]) -> dict[str, float]:
    """userturn's figures of each cell, as inspect metrics (numbers only; none left out
    silently: a null figure is not a metric, and the cells are in the results' metadata)."""
    out: dict[str, float] = {}
    several = len({c.config for c in cells}) > 1
    for c in cells:
        sfx = cell_suffix(c, several)
        if isinstance(c, LikelihoodCell):
            named = {
                "preferred": c.preference_accuracy,
                "preferred_ci_low": c.preference_ci_low,
                "preferred_ci_high": c.preference_ci_high,
                "margin": c.margin,
                "contexts": float(c.n),
            }
        else:
            named = {
                "rate": c.rate,
                "ci_low": c.ci_low,
                "ci_high": c.ci_high,
                "rate_corrected": c.rate_corrected,
                "ci_corrected_low": c.ci_corrected_low,
                "ci_corrected_high": c.ci_corrected_high,
                "n": float(c.n),
                "unparseable": float(c.failed),
                "survival": c.survival if isinstance(c, RolloutCell) else None,
            }
        for k, v in named.items():
            if v is not None and not math.isnan(v):
                out[f"{k}{sfx}"] = float(v)
    return out


def _eval_score(name: str, cells: list[CellSummary], samples: list[EvalSample]) -> EvalScore:
    from inspect_ai.log import EvalMetric, EvalScore

    scored = sum(1 for s in samples if s.scores and name in s.scores)
    return EvalScore(
        name=name,
        scorer=name,
        scored_samples=scored,
        unscored_samples=len(samples) - scored,
        metrics={k: EvalMetric(name=k, value=v) for k, v in _metrics(cells).items()},
        metadata={"cells": [c.to_json() for c in cells]},
    )


def _created(run_dir: Path) -> str:
    """The run's time (its store's mtime): the same run exports to the same header."""
    store = run_dir / "store.sqlite"
    ts = store.stat().st_mtime if store.exists() else 0.0
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def build_logs(run_dir: Path) -> list[EvalLog]:
    """The run's eval logs, one per (model, dataset, probe), in store order."""
    _require_inspect()
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalResults, EvalSpec, EvalStats

    with open_run(run_dir) as store:
        a = analyze(store)
        cards = judge_cards(store)
        groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for rec in iter_records(store):
            groups.setdefault((rec["model"], rec["dataset"], rec["probe"]), []).append(rec)
    manifest = read_manifest(run_dir)
    created = _created(run_dir)
    run_id = hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:22]
    by_group: dict[tuple[str, str, str], list[CellSummary]] = {}
    for c in a.cells:
        by_group.setdefault((c.model, c.dataset, c.probe), []).append(c)
    logs = []
    for (model, dataset, probe), recs in groups.items():
        samples = [_sample(r, i) for i, r in enumerate(recs)]
        cells = by_group.get((model, dataset, probe), [])
        scored = BY_PROBE[probe] is LikelihoodCell  # by the model's scores, no judge
        names = [LIKELIHOOD_SCORER] if scored else _judges(cells)
        scores = [
            _eval_score(n, [c for c in cells if scored or c.judge == n], samples) for n in names
        ]
        eval_id = hashlib.sha256(f"{run_id}/{model}/{dataset}/{probe}".encode()).hexdigest()[:22]
        spec = EvalSpec(
            eval_id=eval_id,
            run_id=run_id,
            created=created,
            task=f"userturn_{probe}",
            task_id=eval_id,
            task_version=userturn.__version__,
            dataset=EvalDataset(
                name=dataset, samples=len(samples), sample_ids=[str(s.id) for s in samples]
            ),
            model=model,
            config=EvalConfig(),
            packages={"userturn": userturn.__version__},
            metadata={
                "userturn": {
                    "run_dir": str(run_dir),
                    "probe": probe,
                    "config": manifest.get("config", {}),
                    "manifest": {k: v for k, v in manifest.items() if k != "config"},
                    "judge_cards": {j: cards[j] for j in names if j in cards},
                }
            },
        )
        logs.append(
            EvalLog(
                status="success",
                eval=spec,
                results=EvalResults(
                    total_samples=len(samples),
                    completed_samples=len(samples),
                    scores=scores,
                    metadata={"cells": [c.to_json() for c in cells]},
                ),
                stats=EvalStats(started_at=created, completed_at=created),
                samples=samples,
            )
        )
    return logs


def _judges(cells: Iterable[CellSummary]) -> list[str]:
    return [j for j in dict.fromkeys(c.judge for c in cells) if j is not None]


def _safe(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in text)[:60]


def export_inspect(run_dir: Path, out: Path) -> list[Exported]:
    """Write ``out/<model>_<dataset>_<probe>.eval`` for every log of the run."""
    from inspect_ai.log import write_eval_log

    logs = build_logs(run_dir)
    if not logs:
        raise UserError("the run has no records to export", file=str(run_dir))
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for log in logs:
        meta = (log.eval.metadata or {})["userturn"]
        name = f"{_safe(log.eval.model)}_{_safe(log.eval.dataset.name or '')}_{meta['probe']}"
        path = out / f"{name}.eval"
        write_eval_log(log, path, format="eval")
        n = len(log.samples or [])
        ds = log.eval.dataset.name or ""
        written.append(Exported(path, log.eval.model, ds, meta["probe"], n))
    return written
