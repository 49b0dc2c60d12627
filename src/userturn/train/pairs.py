"""Self-play preference pairs from a probe run (the paper's future-work idea).

At T>0 one context (item, perturbation: the same answer) yields k user turns, and one
judge splits them: those judged genuine follow-ups are *chosen*, those judged not
(restatements, planning, artifacts, empty turns…) are *rejected*. Pairing only within
a context means the pair differs in the user turn alone, which is what DPO should learn;
pairing only within one judge means one rubric decides both sides. Unparseable and
errored judgments are neither side: an unknown verdict is not a preference.

A pair line (``userturn export pairs``)::

    {"id": "…", "item_id": "gsm8k-3", "dataset": "gsm8k", "model": "smollm2-135m",
     "perturbation": "none", "judge": "rules",
     "messages": [{"role": "user", …}, {"role": "assistant", …}],
     "chosen": "Can you show it with fractions?", "rejected": "<|im_start|>assistant",
     "chosen_label": "plausible_followup", "rejected_label": "malformed_artifact",
     "chosen_temperature": 1.0, "rejected_temperature": 1.0}

``messages`` is the context the model saw; a trainer renders it with its own template
and opens the user header (``userturn render``), then compares the two continuations.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from userturn.errors import UserError
from userturn.rundir.keys import content_key
from userturn.rundir.lines import transcripts
from userturn.rundir.records import Transcript, UserTurnRecord
from userturn.rundir.store import open_run
from userturn.types import CONVERSATION_PROBES, Judgment

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PairStats:
    contexts: int
    with_both: int
    pairs: int
    genuine: int
    rejected: int
    not_ok: int


def run_records(run: Path) -> list[Transcript]:
    """Every user turn of a run with its verdicts (from the store, before any export)."""
    with open_run(run) as store:
        return list(transcripts(store))


def pick_judge(records: Iterable[Transcript], judge: str | None) -> str:
    """The judge to use: the one asked for, or the run's only judge."""
    seen = sorted({j.judge for r in records for j in r.judgments})
    if judge is not None:
        if judge not in seen:
            raise UserError(
                f"judge {judge!r} has no judgments in this run (found: "
                f"{', '.join(seen) or 'none'}); run `userturn judge --run`",
                field="judge",
            )
        return judge
    if len(seen) != 1:
        raise UserError(
            f"the run has judgments from {len(seen)} judges "
            f"({', '.join(seen) or 'none'}); pick one with --judge",
            field="judge",
        )
    return str(seen[0])


def _context_key(r: Transcript) -> tuple[str, str, str, str, str]:
    t = r.turn
    return (t.model, t.dataset, t.config, t.item_id, t.perturbation)


def extract_pairs(
    records: list[Transcript], judge: str, *, max_per_context: int = 4
) -> tuple[list[dict[str, Any]], PairStats]:
    """Pairs (genuine, not genuine) within each context, at most ``max_per_context``.

    Pairs cycle through both sides (round-robin over the product) so a context with one
    genuine and five rejected turns gives varied pairs, not one chosen turn five times
    before anything else. Identical texts on both sides can't happen (one judge), but
    duplicate texts within a side are dropped.
    """
    groups: dict[tuple[str, ...], list[Transcript]] = {}
    for r in records:
        if r.turn.probe not in CONVERSATION_PROBES:
            groups.setdefault(_context_key(r), []).append(r)
    pairs: list[dict[str, Any]] = []
    n_good = n_bad = n_not_ok = with_both = 0
    for key in sorted(groups):
        good, bad, not_ok = _split(groups[key], judge)
        n_good, n_bad, n_not_ok = n_good + len(good), n_bad + len(bad), n_not_ok + not_ok
        if good and bad:
            with_both += 1
            pairs += [_pair(g, b, judge) for g, b in _round_robin(good, bad, max_per_context)]
    return pairs, PairStats(len(groups), with_both, len(pairs), n_good, n_bad, n_not_ok)


Judged = tuple[UserTurnRecord, Judgment]
"""A user turn and its verdict from the chosen judge."""


def _split(group: list[Transcript], judge: str) -> tuple[list[Judged], list[Judged], int]:
    good: list[Judged] = []
    bad: list[Judged] = []
    seen: set[str] = set()
    not_ok = 0
    for r in sorted(group, key=lambda r: (r.turn.temperature or 0.0, r.turn.sample)):
        v = r.verdict(judge)
        if v is None or v.status != "ok" or v.genuine is None:
            not_ok += v is not None
            continue
        if r.turn.user_turn in seen:
            continue
        seen.add(r.turn.user_turn)
        (good if v.genuine else bad).append((r.turn, v))
    return good, bad, not_ok


def _round_robin(good: list[Any], bad: list[Any], limit: int) -> Iterator[tuple[Any, Any]]:
    combos = sorted(
        itertools.product(range(len(good)), range(len(bad))), key=lambda ij: (max(ij), ij[1], ij[0])
    )
    for i, j in combos[:limit]:
        yield good[i], bad[j]


def _pair(g: Judged, b: Judged, judge: str) -> dict[str, Any]:
    (tg, vg), (tb, vb) = g, b
    return {
        "id": content_key("pair", tg.key, tb.key, judge),
        "item_id": tg.item_id,
        "dataset": tg.dataset,
        "model": tg.model,
        "perturbation": tg.perturbation,
        "judge": judge,
        "messages": list(tg.messages),
        "chosen": tg.user_turn,
        "rejected": tb.user_turn,
        "chosen_label": vg.label,
        "rejected_label": vb.label,
        "chosen_temperature": tg.temperature,
        "rejected_temperature": tb.temperature,
        "chosen_id": tg.key,
        "rejected_id": tb.key,
    }


def pairs_from_run(
    run: Path,
    judge: str | None = None,
    *,
    max_per_context: int = 4,
) -> tuple[list[dict[str, Any]], PairStats, str]:
    records = run_records(run)
    used = pick_judge(records, judge)
    pairs, stats = extract_pairs(records, used, max_per_context=max_per_context)
    log.info("pairs from %s (judge %s): %s", run, used, stats)
    return pairs, stats, used


def write_pairs(pairs: list[dict[str, Any]], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for p in pairs:
            f.write(json.dumps(p, ensure_ascii=False) + "\n")
    tmp.replace(path)
