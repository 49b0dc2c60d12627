"""Rules judge: the paper's failure modes made mechanical (offline, free, deterministic).

A fixed cascade checks the cheapest, least ambiguous failures first, so a turn gets the
label of the first rule it trips and the rationale names that rule and its measured value:

1. ``malformed_artifact``: a template/role token or mojibake the context didn't contain,
   symbol soup, or text that keeps switching writing systems (junk tokens).
2. ``degenerate_short``: no words, or a single word / only politeness ("ok", "Thanks!"),
   unless it points back at the answer ("continue", "Why?").
3. ``meta_planning``: an assistant-side planning phrase ("Here's a thinking process").
4. ``previous_turn_restate`` / ``assistant_turn_restate``: most content words come
   from the user prompt or from the answer (ROUGE-1 recall on stems), whichever is closer.
5. ``malformed_artifact``: a repetition loop.
6. ``assistant_turn_restate``: identity drift, the answering side's voice ("To solve this").
7. Too long for a user turn, unless it opens in the user's voice ("I", "can you"): a
   grounded monologue continues the answer; an ungrounded one is garbage.
8. ``new_task_prompt``: few content words come from the conversation and nothing points
   back to it ("this", "your code", "the result").
9. Otherwise ``plausible_followup``. ``other`` is never produced: every rule above names a
   specific failure, and an LLM judge is the place for the rest.

The five numeric thresholds are fit by ``fit_thresholds`` (coordinate ascent on Cohen's
κ for genuine-vs-not over ``../shared/judge_dev.jsonl``); the shipped defaults are that
fit on all of dev. ``bench/judge_cv.py`` re-fits inside cross-validation folds to report
an honest estimate. Options override them: ``rules?max_words=80``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields

from userturn import registry
from userturn.judges.base import Judge
from userturn.judges.rules_features import TextFeatures, measure
from userturn.spec import Spec
from userturn.stats import kappa
from userturn.types import JudgeInput, Judgment, Label

log = logging.getLogger(__name__)

MIN_LETTER_RATIO = 0.3
"""Below this share of letters a turn is symbol soup (fixed: dev has no such case to fit)."""
MAX_SCRIPT_SWITCHES = 6
"""More writing-system switches than this means junk tokens (a stray word switches twice)."""
REFERENCE_MAX_UNITS = 8
"""A pointer back ("this", "your code") grounds a turn of at most this many content words."""


@dataclass(frozen=True)
class Thresholds:
    """The fitted numbers of the cascade (defaults: fit on all of judge_dev.jsonl)."""

    restate_overlap: float = 0.75
    """Content-word recall against q or a at or above which a turn is a restatement."""
    restate_min_units: int = 5
    """Short questions naturally reuse the answer's terms; only longer turns can restate."""
    loop_repetition: float = 0.45
    """Share of repeated word trigrams at or above which a turn is a loop."""
    max_words: int = 70
    """Longer turns are not something a user writes next (they continue or ramble)."""
    min_grounding: float = 0.1
    """Content-word recall against the whole conversation below which a turn is unrelated."""


PRIOR = Thresholds(
    restate_overlap=0.8,
    restate_min_units=5,
    loop_repetition=0.3,
    max_words=60,
    min_grounding=0.3,
)
"""Where every fit starts: hand-set guesses made before looking at any fit, so that a
cross-validation fold's search does not start from the all-of-dev optimum."""


FIT_GRID: dict[str, tuple[float, ...]] = {
    "restate_overlap": tuple(x / 20 for x in range(10, 21)),
    "restate_min_units": tuple(range(2, 13)),
    "loop_repetition": tuple(x / 20 for x in range(4, 17)),
    "max_words": tuple(range(30, 155, 5)),
    "min_grounding": tuple(x / 20 for x in range(0, 13)),
}
"""Candidate values per threshold; ``fit_thresholds`` searches one axis at a time."""


def classify(f: TextFeatures, t: Thresholds) -> tuple[Label, str]:
    """The cascade of the module docstring: the first rule that fires wins."""
    verdict = surface_verdict(f)
    if verdict is not None:
        return verdict
    for rule in (_restatement, _shape):
        verdict = rule(f, t)
        if verdict is not None:
            return verdict
    if not _grounded(f, t):
        return "new_task_prompt", (
            f"content overlap with the conversation {f.grounding:.2f} < {t.min_grounding:.2f}"
            " and no reference back to it"
        )
    why = f"grounding {f.grounding:.2f}"
    if f.grounding < t.min_grounding:
        why = f"refers back with {f.reference!r}"
    return "plausible_followup", f"{_n(f.n_words, 'word')}, {why}, not a restatement"


def _grounded(f: TextFeatures, t: Thresholds) -> bool:
    """Shares enough content with the conversation, or is a short turn pointing back at it.

    "shorten this" has no word in common with the answer yet is about nothing else; a long
    text always contains a "this" somewhere, so the pointer only counts for short turns.
    """
    if f.grounding >= t.min_grounding:
        return True
    return f.reference is not None and f.n_units <= REFERENCE_MAX_UNITS


Verdict = tuple[Label, str] | None


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def surface_verdict(f: TextFeatures) -> Verdict:
    """Failures visible without looking at the context's content (no fitted threshold).

    Public because the offline judge applies the same checks as gates: its reference
    data has almost no empty turns and no planning leaks to learn them from.
    """
    if f.artifact is not None:
        return "malformed_artifact", f"template/role token or mojibake {f.artifact!r}"
    if f.letter_ratio < MIN_LETTER_RATIO:
        return "malformed_artifact", f"letters are {f.letter_ratio:.2f} < {MIN_LETTER_RATIO}"
    if f.n_words == 0 or (f.reference is None and (f.n_words < 2 or f.n_meaningful == 0)):
        return "degenerate_short", f"{_n(f.n_words, 'word')}, {f.n_meaningful} content words"
    if f.script_switches > MAX_SCRIPT_SWITCHES:
        return "malformed_artifact", f"{f.script_switches} writing-system switches (junk tokens)"
    if f.meta_planning is not None:
        return "meta_planning", f"assistant-side planning phrase {f.meta_planning!r}"
    return None


def _restatement(f: TextFeatures, t: Thresholds) -> Verdict:
    """Most of the turn's content words were already in q or in a."""
    if f.n_units < t.restate_min_units or max(f.sim_q, f.sim_a) < t.restate_overlap:
        return None
    if (f.sim_q, f.closer_to_q) > (f.sim_a, not f.closer_to_q):
        return "previous_turn_restate", (
            f"content overlap with the user prompt {f.sim_q:.2f} >= {t.restate_overlap:.2f}"
        )
    return "assistant_turn_restate", (
        f"content overlap with the assistant answer {f.sim_a:.2f} >= {t.restate_overlap:.2f}"
    )


def _shape(f: TextFeatures, t: Thresholds) -> Verdict:
    """Loops, the assistant's voice, and turns too long to be a user's next message."""
    if f.repetition >= t.loop_repetition:
        return "malformed_artifact", (
            f"repeated word trigrams {f.repetition:.2f} >= {t.loop_repetition:.2f}"
        )
    if f.assistant_voice is not None:
        return "assistant_turn_restate", f"answers in the assistant's voice {f.assistant_voice!r}"
    return _too_long(f, t)


def _too_long(f: TextFeatures, t: Thresholds) -> Verdict:
    """A long turn is a monologue, unless it is grounded and opens as the asker.

    Real users do paste long context ("I ran it and got: ..."), so a grounded turn whose
    first words are in the user's voice is let through to the remaining checks.
    """
    if f.n_words <= t.max_words:
        return None
    if not _grounded(f, t):
        return "malformed_artifact", (
            f"{f.n_words} words > {t.max_words} with overlap {f.grounding:.2f} < "
            f"{t.min_grounding:.2f}: incoherent or unrelated text"
        )
    if f.user_voice:
        return None
    return "assistant_turn_restate", (
        f"{f.n_words} words > {t.max_words}, a grounded monologue (overlap"
        f" {f.grounding:.2f}) that continues the answer"
    )


def _kappa_of(t: Thresholds, feats: Sequence[TextFeatures], genuine: Sequence[bool]) -> float:
    """κ on genuine-vs-not, rounded so that float noise doesn't split a plateau; 0 where
    it is undefined (every verdict one class), which no threshold should win on."""
    verdicts = [classify(f, t)[0] == "plausible_followup" for f in feats]
    return round(kappa(verdicts, genuine, labels=[False, True]) or 0.0, 9)


def fit_thresholds(
    feats: Sequence[TextFeatures],
    genuine: Sequence[bool],
    *,
    start: Thresholds | None = None,
    sweeps: int = 3,
) -> Thresholds:
    """Coordinate ascent over ``FIT_GRID`` maximising κ on genuine-vs-not.

    Only σ is fit, as it is the primary metric and the labels among failures are noisier.
    Among the grid values that tie for best on an axis, the median one is kept: on a
    plateau that is the choice farthest from both edges, which generalises better than
    the first or last value that happens to fit the sample.
    """
    best = start or PRIOR
    for _ in range(sweeps):
        before = best
        for name, grid in FIT_GRID.items():
            scores = [_kappa_of(_with(best, name, v), feats, genuine) for v in grid]
            top = max(scores)
            tied = [v for v, s in zip(grid, scores, strict=True) if s == top]
            value = tied[len(tied) // 2]
            best = _with(best, name, value)
        if best == before:
            break
    return best


_INT_FIELDS = frozenset(f.name for f in fields(Thresholds) if f.type in ("int", int))


def _with(t: Thresholds, name: str, value: float) -> Thresholds:
    """``t`` with one threshold changed (ints stay ints, so rationales read "70 words")."""
    values = asdict(t)
    values[name] = int(value) if name in _INT_FIELDS else float(value)
    return Thresholds(**values)


def thresholds_from_options(options: Mapping[str, str]) -> Thresholds:
    """Thresholds with ``rules?name=value`` overrides, checked by the registry."""
    thresholds = Thresholds()
    for name, value in registry.JUDGES["rules"].parse_options(options).items():
        thresholds = _with(thresholds, name, float(value))
    return thresholds


CODE_VERSION = "rules-2"
"""Bump when the cascade or a feature changes; the thresholds enter the version on their own."""


def rules_version(t: Thresholds) -> str:
    """``rules-2+<hash of the thresholds and fixed constants>``: a verdict's cache key must
    change when ``rules?max_words=90`` or a refit changes a number, not only on a release."""
    numbers = {**asdict(t), "letters": MIN_LETTER_RATIO, "switches": MAX_SCRIPT_SWITCHES}
    numbers["reference_units"] = REFERENCE_MAX_UNITS
    digest = hashlib.sha256(json.dumps(numbers, sort_keys=True).encode()).hexdigest()
    return f"{CODE_VERSION}+{digest[:8]}"


class RulesJudge(Judge):
    """The hand-written baseline; see the module docstring for the cascade."""

    def __init__(self, spec: Spec, **kwargs: object) -> None:
        super().__init__(spec)
        self.thresholds = thresholds_from_options(spec.options)
        self.version = rules_version(self.thresholds)

    def judge(self, inputs: list[JudgeInput]) -> list[Judgment]:
        return [self._judge_one(item) for item in inputs]

    def _judge_one(self, item: JudgeInput) -> Judgment:
        try:
            label, why = classify(measure(item.messages, item.user_turn), self.thresholds)
        except Exception as exc:  # one odd row must not sink the batch
            log.warning("rules judge failed on %s: %s", item.id, exc)
            why = f"error: {exc}"
            return Judgment(self.id, None, None, why, "error", version=self.version)
        genuine = label == "plausible_followup"
        return Judgment(self.id, genuine, label, why, "ok", version=self.version)
