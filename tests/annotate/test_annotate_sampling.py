"""Unit tests of packet sampling (pure logic over records.jsonl-shaped dicts).

Run: ``.venv/bin/python -m pytest tests/annotate/test_annotate_sampling.py -q``
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from typing import Any

import pytest

from userturn.annotate.sampling import Pick, arrange, choose, eligible, split_by_agreement
from userturn.errors import UserError


def rec(i: int, a: bool | None, b: bool | None, status_b: str = "ok") -> dict[str, Any]:
    judgments = []
    if a is not None:
        judgments.append({"judge": "A", "genuine_followup": a, "status": "ok"})
    if b is not None or status_b != "ok":
        judgments.append({"judge": "B", "genuine_followup": b, "status": status_b})
    return {
        "id": f"r{i:03d}",
        "messages": [{"role": "user", "content": "q"}],
        "user_turn": "u",
        "judgments": judgments,
    }


def test_split_counts_records_without_every_verdict_as_undecided() -> None:
    recs = [
        rec(0, True, True),
        rec(1, True, False),
        rec(2, False, None),
        rec(3, False, None, status_b="unparseable"),
        rec(4, False, False),
    ]
    dis, agr, undecided = split_by_agreement(recs, ["A", "B"])
    assert (dis, agr, undecided) == (["r001"], ["r000", "r004"], 2)


def test_eligible_keeps_empty_user_turns_but_not_missing_ones() -> None:
    recs = [
        rec(0, True, True),
        {**rec(1, True, True), "user_turn": ""},
        {**rec(2, True, True), "user_turn": None},
        {**rec(3, True, True), "messages": []},
    ]
    assert [r["id"] for r in eligible(recs)] == ["r000", "r001"]


def pool(n_dis: int, n_agr: int) -> list[dict[str, Any]]:
    return [rec(i, True, False) for i in range(n_dis)] + [
        rec(100 + i, True, True) for i in range(n_agr)
    ]


@pytest.mark.parametrize(
    ("n_dis", "n_agr", "n", "share", "want"),
    [
        (20, 20, 10, 0.5, {"disagreement": 5, "agreement": 5}),
        (20, 20, 10, 0.3, {"disagreement": 3, "agreement": 7}),
        (2, 20, 10, 0.5, {"disagreement": 2, "agreement": 8}),  # refill from agreements
        (20, 1, 10, 0.5, {"disagreement": 9, "agreement": 1}),  # refill from disagreements
        (3, 4, 10, 0.5, {"disagreement": 3, "agreement": 4}),  # fewer than n: take all
    ],
)
def test_disagreement_share_and_refill(
    n_dis: int, n_agr: int, n: int, share: float, want: dict[str, int]
) -> None:
    picks = choose(
        pool(n_dis, n_agr), n, "disagreement", random.Random(0), judges=["A", "B"], share=share
    )
    assert dict(Counter(p.stratum for p in picks)) == want
    assert len({p.record_id for p in picks}) == len(picks)
    for p in picks:
        assert p.record_id.startswith("r1") == (p.stratum == "agreement")


def test_fewer_than_n_warns_and_zero_is_an_error(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        picks = choose(pool(1, 2), 10, "prevalence", random.Random(0))
    assert len(picks) == 3 and "fewer than --n 10" in caplog.text
    with pytest.raises(UserError, match="nothing to annotate"):
        choose([], 10, "prevalence", random.Random(0))
    with pytest.raises(UserError, match="nothing to annotate"):
        choose([rec(0, True, None)], 10, "disagreement", random.Random(0), judges=["A", "B"])


def test_prevalence_is_uniform_over_records() -> None:
    recs = pool(30, 70)
    hits = Counter(
        p.stratum
        for seed in range(200)
        for p in choose(recs, 10, "prevalence", random.Random(seed))
    )
    assert set(hits) == {"prevalence"}
    dis_share = (
        sum(
            p.record_id < "r100"
            for seed in range(200)
            for p in choose(recs, 10, "prevalence", random.Random(seed))
        )
        / 2000
    )
    assert 0.25 < dis_share < 0.35  # the natural 30% rate, not the 50% design share


def test_arrange_plants_duplicates_well_after_their_original() -> None:
    picks = [Pick(f"r{i:03d}", "prevalence") for i in range(40)]
    order = arrange(picks, 5, random.Random(3))
    assert len(order) == 45
    dups = [i for i, p in enumerate(order) if p.duplicate]
    assert len(dups) == 5
    for i in dups:
        first = next(j for j, p in enumerate(order) if p.record_id == order[i].record_id)
        assert first < i and i - first > 40 // 4
    assert arrange(picks, 5, random.Random(3)) == order  # seeded
    assert [p.record_id for p in arrange(picks, 0, random.Random(4))] != [
        p.record_id for p in arrange(picks, 0, random.Random(3))
    ]


def test_more_duplicates_than_examples_plants_each_once() -> None:
    order = arrange([Pick("a", "prevalence"), Pick("b", "prevalence")], 9, random.Random(0))
    assert sorted(p.record_id for p in order) == ["a", "a", "b", "b"]
