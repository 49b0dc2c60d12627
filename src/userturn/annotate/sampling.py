"""Which records go into an annotation packet, and in what order.

Pure logic over records.jsonl-shaped dicts, so it is unit-tested without a run. Two
designs from the paper: ``disagreement`` over-samples the cases where judges split
(where a human verdict is most informative) plus agreed cases in a stated share, and
``prevalence`` samples uniformly, so the packet's genuine rate estimates the run's.
Everything random goes through one seeded ``random.Random``: the same run, seed and
options give the same packet order.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from userturn.errors import UserError

log = logging.getLogger(__name__)

Sampling = Literal["disagreement", "prevalence"]
Stratum = Literal["disagreement", "agreement", "prevalence"]


@dataclass(frozen=True)
class Pick:
    """One slot of the packet: a record, why it was drawn, and whether it is a replant."""

    record_id: str
    stratum: Stratum
    duplicate: bool = False


def eligible(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Records an annotator can judge: a context and a user turn (empty text counts)."""
    return [r for r in records if isinstance(r.get("user_turn"), str) and r.get("messages")]


def split_by_agreement(
    records: Sequence[dict[str, Any]], judges: Sequence[str]
) -> tuple[list[str], list[str], int]:
    """(disagreement ids, agreement ids, undecided count) on σ among ``judges``.

    A record where any chosen judge has no ok verdict is undecided: we can't call it an
    agreement or a disagreement, so it is left out and counted rather than guessed.
    """
    dis: list[str] = []
    agr: list[str] = []
    undecided = 0
    for rec in records:
        verdicts = {j.get("judge"): j for j in rec.get("judgments") or []}
        sigmas = []
        for judge in judges:
            v = verdicts.get(judge)
            if v is None or v.get("status") != "ok" or v.get("genuine_followup") is None:
                break
            sigmas.append(bool(v["genuine_followup"]))
        else:
            (dis if len(set(sigmas)) > 1 else agr).append(str(rec["id"]))
            continue
        undecided += 1
    return sorted(dis), sorted(agr), undecided


def choose(
    records: Sequence[dict[str, Any]],
    n: int,
    sampling: Sampling,
    rng: random.Random,
    *,
    judges: Sequence[str] = (),
    share: float = 0.5,
) -> list[Pick]:
    """Draw up to ``n`` distinct records (all of them, with a warning, if fewer)."""
    if sampling == "prevalence":
        ids = sorted(str(r["id"]) for r in records)
        _check_size(len(ids), n, "records with a user turn")
        return [Pick(i, "prevalence") for i in rng.sample(ids, min(n, len(ids)))]
    dis, agr, undecided = split_by_agreement(records, judges)
    if undecided:
        log.warning(
            "%d records lack an ok verdict from every judge in %s; left out",
            undecided,
            ", ".join(judges),
        )
    _check_size(len(dis) + len(agr), n, "records judged by all of " + ", ".join(judges))
    want_dis = min(len(dis), round(min(n, len(dis) + len(agr)) * share))
    want_agr = min(len(agr), n - want_dis)
    want_dis = min(len(dis), n - want_agr)  # refill from disagreements if agreements ran out
    if len(dis) + len(agr) >= n and want_dis != round(n * share):
        log.warning(
            "only %d disagreements and %d agreements: packet has %d and %d "
            "(asked for a %.0f%% disagreement share)",
            len(dis),
            len(agr),
            want_dis,
            want_agr,
            share * 100,
        )
    picks = [Pick(i, "disagreement") for i in rng.sample(dis, want_dis)]
    picks += [Pick(i, "agreement") for i in rng.sample(agr, want_agr)]
    return picks


def _check_size(available: int, n: int, what: str) -> None:
    if available == 0:
        raise UserError(f"no {what}: nothing to annotate", field="n")
    if available < n:
        log.warning("only %d %s, fewer than --n %d: taking all of them", available, what, n)


def arrange(picks: list[Pick], duplicates: int, rng: random.Random) -> list[Pick]:
    """Shuffle, then replant ``duplicates`` picks well after their first showing.

    A duplicate shown right after its original measures short-term memory, not
    consistency, so originals come from the first three quarters of the shuffled order
    and each replant lands at least a quarter of the packet later.
    """
    order = list(picks)
    rng.shuffle(order)
    if duplicates > len(picks):
        log.warning(
            "--duplicates %d > %d examples: planting %d", duplicates, len(picks), len(picks)
        )
    duplicates = min(duplicates, len(picks))
    gap = max(1, len(order) // 4)
    roomy = order[: len(order) - gap]
    sources = rng.sample(roomy if len(roomy) >= duplicates else order, duplicates)
    for src in sources:
        lo = min(len(order), order.index(src) + 1 + gap)
        order.insert(rng.randint(lo, len(order)), Pick(src.record_id, src.stratum, True))
    return order
