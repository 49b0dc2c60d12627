"""Cells: the genuine-follow-up rate per (model, dataset, T, perturbation, judge, config).

The rate's denominator is judgments with status ok; unparseable and errored judgments
are counted beside it, never folded into "not genuine". With one sample per context the
interval is Wilson; with k > 1 samples per context they are correlated, so the interval
resamples items, not turns (``analysis.intervals``). Cells keep per-item counts so that
every later view (deltas, comparisons, corrected rates, GF@k) can resample items too.

A cell never pools rows of two config fingerprints, two probes or two rollout turns:
those are part of its key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from userturn.analysis.cards import judge_cards
from userturn.analysis.cell import (
    JUDGED_BY_PROBE,
    CellSummary,
    GenerateCell,
    LikelihoodCell,
    RolloutCell,
)
from userturn.analysis.correction import Corrected, cell_error_draws, stratified_rate
from userturn.analysis.intervals import CI, ItemCounts, mean_interval, rate_interval, wilson
from userturn.analysis.probe_stats import (
    Estimate,
    mean_of,
    paired_auc,
    paired_delta,
    paired_share_difference,
    share_positive,
)
from userturn.analysis.sampling import (
    KMeasure,
    SpreadMeasures,
    corrected_gf_at_k,
    corrected_spread,
    gf_at_k,
    item_spread,
    null_spread,
)
from userturn.judges import normalize_judge_spec
from userturn.judges.card import card_digest
from userturn.rundir.records import LikelihoodRecord
from userturn.rundir.store import JudgmentFact, Store, TurnFact

CellKey = tuple[str, str, float | None, str, str | None, str, str, int]


@dataclass
class Answer:
    item_id: str
    correct: bool | None
    truncated: bool
    incomplete_reasoning: bool = False


@dataclass
class Cell:
    """One cell being counted, with per-item counts kept for resampling."""

    model: str
    dataset: str
    temperature: float | None
    perturbation: str
    judge: str | None
    config: str = ""
    probe: str = "generate"
    turn: int = 1
    family: str = ""
    n_total: int = 0
    genuine: int = 0
    n: int = 0
    unparseable: int = 0
    errors: int = 0
    challenges: int = 0
    challenge_n: int = 0
    not_applied: int = 0
    labels: Counter[str] = field(default_factory=Counter)
    per_item: dict[str, list[int]] = field(default_factory=dict)
    item_challenges: dict[str, list[int]] = field(default_factory=dict)
    """Per item: [turns that challenge the answer, turns whose verdict says]."""
    answers: dict[str, Answer] = field(default_factory=dict)
    max_samples: int = 0

    @property
    def key(self) -> CellKey:
        return (
            self.model,
            self.dataset,
            self.temperature,
            self.perturbation,
            self.judge,
            self.config,
            self.probe,
            self.turn,
        )

    def add(self, fact: TurnFact, answer: Answer, judgment: JudgmentFact | None) -> None:
        """Count one user turn and this cell's judge's verdict on it (None: not judged).
        A turn whose perturbation could not apply saw the original answer: it is counted
        apart (``n_not_applied``), never in the perturbed cell's rate."""
        if not fact.perturbed:
            self.not_applied += 1
            return
        self.n_total += 1
        self.max_samples = max(self.max_samples, fact.sample + 1)
        self.answers[fact.answer_key] = answer
        counts = self.per_item.setdefault(fact.item_id, [0, 0])
        if judgment is None:
            return
        if judgment.status == "ok":
            self.n += 1
            self.genuine += int(bool(judgment.genuine))
            self.labels[str(judgment.label)] += 1
            counts[0] += int(bool(judgment.genuine))
            counts[1] += 1
            if judgment.challenges_answer is not None:
                self.challenge_n += 1
                self.challenges += int(judgment.challenges_answer)
                per = self.item_challenges.setdefault(fact.item_id, [0, 0])
                per[0] += int(judgment.challenges_answer)
                per[1] += 1
        elif judgment.status == "unparseable":
            self.unparseable += 1
        else:
            self.errors += 1

    def item_counts(self, items: Iterable[str] | None = None) -> ItemCounts:
        keys = self.per_item if items is None else items
        return [(self.per_item[i][0], self.per_item[i][1]) for i in keys]

    @property
    def rate(self) -> float | None:
        return self.genuine / self.n if self.n else None

    @property
    def accuracy(self) -> float | None:
        scored = [a.correct for a in self.answers.values() if a.correct is not None]
        return sum(scored) / len(scored) if scored else None

    def ci(self) -> tuple[CI, str]:
        return rate_interval(self.item_counts())

    def summary(
        self, card: dict[str, Any] | None = None, selected_by: str | None = None
    ) -> GenerateCell | RolloutCell:
        """The cell as summary.json holds it (a rollout cell for rollout turns); ``card``
        is the judge's card, if it has one (then the rate is corrected with the card's
        strata for this cell, and GF@k and the item spread gain their corrected values
        and null floors). ``selected_by``: the judge that chose a best-of rollout's
        turns; such a cell is never corrected."""
        (lo, hi), method = self.ci()
        counts = self.item_counts()
        spread = item_spread(counts)
        fixed = self._corrected(counts, card, selected_by) if card and self.n else None
        ks, fixed_spread = (
            self._k_measures(counts, card) if card and self.n and not selected_by else ({}, None)
        )
        spec = None if fixed is None else fixed.spec
        nulls = null_spread(counts, spec) if spec is not None and not selected_by else None
        kind = JUDGED_BY_PROBE[self.probe]
        return kind(
            model=self.model,
            dataset=self.dataset,
            temperature=self.temperature,
            perturbation=self.perturbation,
            judge=self.judge,
            config=self.config,
            turn=self.turn if kind.turns else None,
            family=self.family,
            n_total=self.n_total,
            n=self.n,
            genuine=self.genuine,
            rate=self.rate,
            ci_low=lo,
            ci_high=hi,
            ci_method=method,
            samples=self.max_samples,
            n_items=len(self.per_item),
            unparseable=self.unparseable,
            errors=self.errors,
            accuracy=self.accuracy,
            n_answers=len(self.answers),
            answers_truncated=sum(1 for a in self.answers.values() if a.truncated),
            answers_incomplete_reasoning=sum(
                1 for a in self.answers.values() if a.incomplete_reasoning
            ),
            labels=dict(sorted(self.labels.items(), key=lambda kv: (-kv[1], kv[0]))),
            challenge_rate=self.challenges / self.challenge_n if self.challenge_n else None,
            challenge_n=self.challenge_n,
            n_not_applied=self.not_applied,
            gf_at_k=gf_at_k(counts) or None,
            items_never=spread.never,
            items_sometimes=spread.sometimes,
            items_always=spread.always,
            item_rate_histogram=list(spread.histogram) if spread.n_items else None,
            judge_card=None if card is None else str(card["card_id"]),
            judge_card_sha=None if card is None else card_digest(card),
            rate_corrected=None if fixed is None else fixed.rate,
            ci_corrected_low=None if fixed is None else fixed.ci_low,
            ci_corrected_high=None if fixed is None else fixed.ci_high,
            correction_note=(fixed.note or None) if fixed is not None else None,
            correction_strata=(fixed.strata or None) if fixed is not None else None,
            correction_sensitivity=None if fixed is None else fixed.sens,
            correction_specificity=spec,
            selected_by=selected_by,
            gf_at_k_corrected={k: m.value for k, m in ks.items() if m.value is not None} or None,
            gf_at_k_corrected_ci={
                k: [m.ci_low, m.ci_high]
                for k, m in ks.items()
                if m.ci_low is not None and m.ci_high is not None
            }
            or None,
            gf_at_k_null={k: m.null for k, m in ks.items()} or None,
            items_never_null=None if nulls is None else nulls[0],
            items_sometimes_null=None if nulls is None else nulls[1],
            items_always_null=None if nulls is None else nulls[2],
            **_spread_fields(fixed_spread),
        )

    def _corrected(
        self, counts: ItemCounts, card: dict[str, Any], selected_by: str | None
    ) -> Corrected:
        if selected_by is None:
            return stratified_rate(counts, card, self.dataset, self.model, self.family)
        why = (
            f"not corrected: best-of turns chosen by judge {selected_by}, and the card "
            "describes turns nobody selected"
        )
        if selected_by == self.judge:
            why += "; scored by the judge that chose them, so biased upward"
        return Corrected(None, None, None, False, why)

    def _k_measures(
        self, counts: ItemCounts, card: dict[str, Any]
    ) -> tuple[dict[int, KMeasure], SpreadMeasures | None]:
        """Corrected GF@k and item spread with CIs and null floors, for cells with k > 1
        samples, through the same draws of the judge's error rates."""
        if self.max_samples < 2:
            return {}, None
        draws = cell_error_draws(card, self.dataset, self.model, self.family)
        gf = corrected_gf_at_k(counts, draws.sens, draws.spec, draws.point)
        return gf, corrected_spread(counts, draws.sens, draws.spec, draws.point)


def _spread_fields(fixed: SpreadMeasures | None) -> dict[str, Any]:
    """``items_{never,sometimes,always}_corrected`` and their CIs (None: not corrected)."""
    out: dict[str, float | None] = {}
    for name in ("never", "sometimes", "always"):
        m = None if fixed is None else getattr(fixed, name)
        out[f"items_{name}_corrected"] = None if m is None else m.value
        out[f"items_{name}_corrected_ci_low"] = None if m is None else m.ci_low
        out[f"items_{name}_corrected_ci_high"] = None if m is None else m.ci_high
    return out


def _judgment_index(store: Store) -> dict[str, dict[str, JudgmentFact]]:
    out: dict[str, dict[str, JudgmentFact]] = {}
    for fact in store.judgment_facts():
        out.setdefault(fact.user_turn_key, {})[fact.judge] = fact
    return out


def collect_cells(store: Store) -> list[Cell]:
    """Every cell in the store, in report order, with per-item counts for resampling.

    A user turn that a judge has not (yet) judged counts in that judge's ``n_total`` but
    not in its ``n``, so partially judged runs show the gap instead of hiding it.
    """
    judged = _judgment_index(store)
    judges: list[str | None] = list(store.judges()) or [None]
    cells: dict[CellKey, Cell] = {}
    for fact in store.turn_facts():
        answer = Answer(
            fact.item_id,
            fact.correct,
            fact.answer_finish in ("length", "length_in_reasoning"),
            fact.answer_finish == "length_in_reasoning",
        )
        by_judge = judged.get(fact.key, {})
        for judge in judges:
            ck: CellKey = (
                fact.model,
                fact.dataset,
                fact.temperature,
                fact.perturbation,
                judge,
                fact.config,
                fact.probe,
                fact.turn,
            )
            cell = cells.get(ck)
            if cell is None:
                cell = cells[ck] = Cell(*ck, family=fact.family)
            cell.add(fact, answer, by_judge.get(judge) if judge else None)
    return sorted(cells.values(), key=_cell_order)


def summary_cells(store: Store, cells: list[Cell] | None = None) -> list[CellSummary]:
    """One cell per key over the whole store (summary.json), judge-corrected where the
    judge has a card, with survival on rollout cells and likelihood cells at the end.
    ``cells``: the store's cells when the caller has collected them already."""
    cards = judge_cards(store)
    counted = collect_cells(store) if cells is None else cells
    chosen = selectors(store)
    summaries = [c.summary(cards.get(c.judge or ""), chosen.get(c.config)) for c in counted]
    return [*with_survival(summaries, store), *likelihood_cells(store)]


def selectors(store: Store) -> dict[str, str]:
    """config id -> the judge that chose its best-of rollout turns (configs with
    ``best_of`` > 1 only), from the fingerprint, so a recovered store says the same."""
    out = {}
    for config_id, opts in store.configs().items():
        if int(opts.get("best_of") or 1) > 1:
            spec = opts.get("select_judge")
            out[config_id] = normalize_judge_spec(str(spec)) if spec else "the first judge"
    return out


SurvivalKey = tuple[str, str, str, str, float | None, str | None, int]
"""(model, dataset, config, perturbation, T, judge, turn)."""


def with_survival(
    cells: list[GenerateCell | RolloutCell], store: Store
) -> list[GenerateCell | RolloutCell]:
    """Rollout cells gain ``survival``: the share of conversations whose user turns 1..t
    were all genuine (by the cell's judge), with an interval clustered by item, and its
    null floor (1 - specificity)^t: what the judge reports if no turn is genuine."""
    survival = rollout_survival(store)
    out = []
    for c in cells:
        key = (c.model, c.dataset, c.config, c.perturbation, c.temperature, c.judge, c.turn or 0)
        counts = [x for x in survival.get(key, []) if x[1] > 0]
        if not isinstance(c, RolloutCell) or not counts:
            out.append(c)
            continue
        (lo, hi), _ = rate_interval(counts)
        rate = sum(g for g, _ in counts) / sum(n for _, n in counts)
        spec = c.correction_specificity if c.selected_by is None else None
        null = None if spec is None else (1 - spec) ** (c.turn or 1)
        out.append(
            replace(c, survival=rate, survival_ci_low=lo, survival_ci_high=hi, survival_null=null)
        )
    return out


def rollout_survival(store: Store) -> dict[SurvivalKey, ItemCounts]:
    """Per (model, dataset, config, perturbation, T, judge, turn t): per item,
    (conversations still genuine at t, conversations whose state at t is known).

    Conversations are keyed by config and perturbation too, so two experiments' turns
    never join into one conversation. A conversation is dead from its first turn judged
    ok and not genuine, and from a turn it never reached because ``stop_on`` ended it. A
    turn whose verdict is not ok, or not there yet, leaves its state unknown from then
    on: the conversation leaves the denominator, as an unparseable verdict leaves a
    cell's, instead of counting as not survived.
    """
    convs: dict[tuple[Any, ...], dict[int, str]] = {}
    for f in store.turn_facts(probe="rollout"):
        key = (f.model, f.dataset, f.config, f.perturbation, f.temperature, f.item_id, f.sample)
        convs.setdefault(key, {})[f.turn] = f.key
    if not convs:
        return {}
    verdicts = {
        (f.user_turn_key, f.judge): f.genuine if f.status == "ok" else None
        for f in store.judgment_facts()
    }
    judges = store.judges()
    stopping = {c for c, opts in store.configs().items() if opts.get("stop_on") == "degenerate"}
    out: dict[SurvivalKey, dict[str, list[int]]] = {}
    horizon = max((max(turns) for turns in convs.values()), default=0)
    for (model, dataset, config, pert, temp, item, _), turns in convs.items():
        for judge in judges:
            state: bool | None = True  # alive; False dead; None unknown
            for t in range(1, horizon + 1):
                if state is True and t not in turns:
                    state = False if config in stopping else None
                elif state is True:
                    verdict = verdicts.get((turns[t], judge))
                    state = None if verdict is None else bool(verdict)
                slot = out.setdefault((model, dataset, config, pert, temp, judge, t), {})
                counts = slot.setdefault(item, [0, 0])
                counts[0] += int(state is True)
                counts[1] += int(state is not None)
    return {k: [(g, n) for g, n in v.values()] for k, v in out.items()}


def _cell_order(c: Cell) -> tuple[Any, ...]:
    return (
        c.model,
        c.dataset,
        c.config,
        c.probe,
        c.turn,
        c.perturbation != "none",
        c.perturbation,
        c.temperature if c.temperature is not None else -1,
        c.judge or "",
    )


def top_labels(labels: dict[str, int], k: int = 2, exclude: Iterable[str] = ()) -> str:
    total = sum(labels.values())
    skip = set(exclude)
    items = sorted(
        ((lab, n) for lab, n in labels.items() if lab not in skip), key=lambda kv: (-kv[1], kv[0])
    )
    return ", ".join(f"{lab} {n / total:.0%}" for lab, n in items[:k]) if total else ""


def likelihood_cells(store: Store) -> list[LikelihoodCell]:
    """One cell per (model, dataset, perturbation, config) of the likelihood probe: the
    version 2 measures (answer PMI and role contrast, ``likelihood_measures``) and, as a
    secondary field, the ranking (share of contexts whose real turn beats every degenerate
    candidate, Wilson CI; mean margin in nats per token, bootstrap CI). Contexts whose
    reference copies a context turn are counted and left out of every measure."""
    groups: dict[tuple[str, str, str, str], list[LikelihoodRecord]] = {}
    for rec in store.likelihoods():
        groups.setdefault((rec.model, rec.dataset, rec.perturbation, rec.config), []).append(rec)
    out = []
    for (model, dataset, pert, config), every in groups.items():
        recs = [r for r in every if not r.excluded]
        if not recs:
            continue
        wins = sum(bool(r.prefers_real) for r in recs)
        margins = [r.margin for r in recs if r.margin is not None]
        p_lo, p_hi = wilson(wins, len(recs))
        m_lo, m_hi = mean_interval(margins)
        out.append(
            LikelihoodCell(
                model=model,
                dataset=dataset,
                temperature=None,
                perturbation=pert,
                judge=None,
                config=config,
                family=recs[0].family,
                n_total=len(recs),
                n=len(recs),
                n_items=len({r.item_id for r in recs}),
                preference_accuracy=wins / len(recs),
                preference_ci_low=p_lo,
                preference_ci_high=p_hi,
                margin=sum(margins) / len(margins),
                margin_ci_low=m_lo,
                margin_ci_high=m_hi,
                likelihood_excluded=len(every) - len(recs),
                **likelihood_measures(recs),
            )
        )
    return sorted(out, key=lambda c: (c.model, c.dataset, c.config, c.perturbation))


def likelihood_measures(recs: list[LikelihoodRecord]) -> dict[str, Any]:
    """The version 2 fields of a likelihood cell (all None for version 1 records)."""
    versions = sorted({r.candidates_version for r in recs})
    out: dict[str, Any] = {"likelihood_version": ",".join(versions)}
    both = [(r.pmi("real"), r.pmi("new_task_prompt")) for r in recs]
    pairs = [(a, b) for a, b in both if a is not None and b is not None]
    real, ctrl = [a for a, _ in pairs], [b for _, b in pairs]
    out |= _estimate("pmi_share", share_positive(real))
    out |= _estimate("pmi_mean", mean_of(real))
    out["pmi_control_share"] = share_positive(ctrl).value
    out["pmi_control_mean"] = mean_of(ctrl).value
    out |= _estimate("pmi_excess_share", paired_share_difference(real, ctrl))
    out |= _estimate("pmi_excess_mean", mean_of([a - b for a, b in pairs]))
    roles = [(r.role("real"), r.role("assistant_turn_restate")) for r in recs]
    rpairs = [(a, b) for a, b in roles if a is not None and b is not None]
    role_real = [a for a, _ in rpairs]
    out |= _estimate("role_share", share_positive(role_real))
    out |= _estimate("role_mean", mean_of(role_real))
    out |= _estimate("role_auc", paired_auc(role_real, [b for _, b in rpairs]))
    return out


def _estimate(name: str, e: Estimate) -> dict[str, float | None]:
    return {name: e.value, f"{name}_ci_low": e.low, f"{name}_ci_high": e.high}


def paired_challenges(treated: Cell, base: Cell) -> dict[str, Any]:
    """The challenge rate under a perturbation against the same items' clean answers:
    per item, its challenge share perturbed minus clean, averaged over the items that have
    both (bootstrap CI over items), overall and split by whether the clean answer was
    correct. Items seen on one side only are left out, so a delta never compares
    different items."""
    shared = sorted(set(treated.item_challenges) & set(base.item_challenges))
    correct = {a.item_id: a.correct for a in base.answers.values()}
    out: dict[str, Any] = {"challenge_items": len(shared)}
    if not shared:
        return out

    def share(cell: Cell, item: str) -> float:
        k, n = cell.item_challenges[item]
        return k / n

    def delta(items: list[str]) -> Estimate:
        return paired_delta([share(treated, i) for i in items], [share(base, i) for i in items])

    out["challenge_rate"] = sum(share(treated, i) for i in shared) / len(shared)
    out["challenge_rate_base"] = sum(share(base, i) for i in shared) / len(shared)
    for name, items in (
        ("challenge_delta", shared),
        ("challenge_delta_correct", [i for i in shared if correct.get(i) is True]),
        ("challenge_delta_incorrect", [i for i in shared if correct.get(i) is False]),
    ):
        e = delta(items)
        out |= {name: e.value, f"{name}_ci_low": e.low, f"{name}_ci_high": e.high}
        out[f"{name.replace('delta', 'items')}"] = len(items)
    return out
