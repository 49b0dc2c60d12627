"""Offline judge (spec ``offline``): a learned classifier over features that read meaning.

The rules judge decides "genuine" from word overlap alone. This judge measures what
separates a follow-up from each failure mode: hand-made features (``offline_features``),
paraphrase similarities from sentence embeddings and an act and voice head over the
turn's own wording (``offline_meaning``), and lets a model fitted on the reference labels
weigh the evidence (``offline_fit`` re-fits it; the parameters ship as
``offline_params.json``).

A verdict is made in three steps:

1. **Gates**: failures the reference files barely contain, so no model can learn them,
   are settled by fixed checks: the rules judge's surface checks (empty or filler-only
   turns, template tokens and mojibake, symbol soup, planning phrases); quiz frames
   ("What is the answer to this question: ...") and self-contained word problems with
   new numbers; and, for a turn without any dialogue-act cue, the assistant's voice or
   a re-ask that adds no new question word. A turn that shares no content word with the
   conversation is left to the model (``ungrounded`` is a feature): people's real next
   turns often give new details in new words ("im 71 and already on spiriva"), which a
   fixed verdict called new tasks.
   On judge_train each gate is right about σ in at least 7 of 9 turns it fires on, and
   the gates raised cross-validated κ there (0.59 -> 0.61).
   One gate says *genuine*: a short request to revise, re-present or carry on the answer
   ("Can you show the calculation as a small table?", "make it firmer", "keep going"),
   whose object points back or names a form or audience, or to explain it again
   ("detailed answer", "explain me like im five"; ``offline_cues.acts_on_answer``).
   Such a request shares no word with the answer, so the model read it as a new task.
   It fires on 36 of the 1,314 fit turns, all genuine by the reference, and on no turn
   of ``make run``. A second says genuine when the answer asked the user for something in
   particular and the turn, a statement in the first person, hands it over ("I hold a
   Bachelor of Science ...", "we only have a ct scanner"; ``offline_cues.hands_over``): on
   the fit turns it fires on 22, the 18 it decides all genuine (the other 4 are settled
   first by the surface and voice gates). After an answer that hands the user the next
   move ("What is your response?", "What do you do?"), a few words without a question
   are that move ("fine. hxg4"). And the answer's own closing question asked
   back ("Could you tell me when you're going?") is the assistant's voice.
2. **σ**: an ensemble of extremely randomised trees gives a score, Platt-scaled into
   P(genuine); the turn is genuine when P reaches the threshold that maximised
   out-of-fold κ during the fit.
3. **Label**: for a degenerate turn, a second forest over the degenerate labels.

The rationale names the deciding evidence: the gate, or the two features that moved
P(genuine) most in the verdict's direction (the forest's path attribution).
Each verdict carries ``probability`` (of genuine; gates do not change it) and
``challenges_answer`` (cue-based: does the turn dispute the answer's correctness?).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, replace
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from userturn import registry
from userturn.errors import UserError
from userturn.judges.base import Judge
from userturn.judges.offline_features import FEATURES, NAMES, Feature, Measured, measure_turn
from userturn.judges.offline_forest import Forest
from userturn.judges.offline_meaning import (
    HEAD_CLASSES,
    HEAD_NAMES,
    MEANING_FEATURES,
    SIMILARITIES,
    Head,
    TurnMeaning,
    head_inputs,
    measure_meaning,
)
from userturn.judges.rules import surface_verdict
from userturn.spec import Spec
from userturn.types import LABELS, JudgeInput, Judgment, Label

log = logging.getLogger(__name__)

CODE_VERSION = "offline-5"
"""Bump when features or gates change; the fitted parameters enter the version by hash."""
PARAMS = "offline_params.json"
FORMAT = "userturn-offline-3"
ALL_FEATURES: tuple[Feature, ...] = FEATURES + MEANING_FEATURES
ALL_NAMES: tuple[str, ...] = NAMES + SIMILARITIES + HEAD_NAMES
GATES = ("surface", "task", "voice", "act", "reply")
"""Gate families (see ``gate``); a parameter file names those it was fit with."""
WORD_PROBLEM_NUMBERS = 2
"""A word problem needs at least this many numbers the conversation never mentioned."""
REASK_SIMILARITY = 0.6
"""Sentence or whole-turn similarity to the request (Dice on content words and numbers)
from which a question that adds no new question word is a re-ask."""
ECHO_SIMILARITY = 0.85
"""Embedding similarity to the answer's last sentence, when the answer asked the user
something, from which a question without an act cue asks the answer's question back."""


@dataclass(frozen=True)
class Params:
    """The fitted model: two forests, the σ calibration and threshold, and provenance."""

    sigma: Forest
    calibration: tuple[float, float]
    threshold: float
    label_classes: tuple[Label, ...]
    labels: Forest
    head: Head
    gates: tuple[str, ...]
    digest: str
    raw: dict[str, Any]

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Params:
        if data.get("format") != FORMAT or list(data.get("features", [])) != list(ALL_NAMES):
            raise UserError(f"offline judge parameters are not {FORMAT} with these features")
        gates = tuple(data.get("gates", ()))
        if set(gates) - set(GATES) or tuple(data["head"]["classes"]) != HEAD_CLASSES:
            raise UserError("offline judge parameters name unknown gates or head classes")
        classes = tuple(data["labels"]["classes"])
        unknown = set(classes) - set(LABELS)
        if unknown:
            raise UserError(f"offline judge parameters name unknown labels {sorted(unknown)}")
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return cls(
            sigma=Forest.from_json(data["sigma"]["forest"]),
            calibration=(float(data["sigma"]["platt"][0]), float(data["sigma"]["platt"][1])),
            threshold=float(data["sigma"]["threshold"]),
            label_classes=classes,  # type: ignore[arg-type]  # checked against LABELS
            labels=Forest.from_json(data["labels"]["forest"]),
            head=Head.from_json(data["head"]),
            gates=gates,
            digest=hashlib.sha256(canonical.encode()).hexdigest(),
            raw=data,
        )


@lru_cache(maxsize=1)
def shipped_params() -> Params:
    """The parameters shipped in the package (read once per process)."""
    text = resources.files("userturn.judges").joinpath(PARAMS).read_text(encoding="utf-8")
    return Params.from_json(json.loads(text))


@dataclass(frozen=True)
class Scored:
    """The model's view of a batch: P(genuine), attributions, label distribution."""

    p_genuine: np.ndarray
    contrib: np.ndarray
    label_p: np.ndarray


def score(params: Params, x: np.ndarray) -> Scored:
    """Run both forests over a feature matrix (rows in ``FEATURES`` order)."""
    raw, contrib = params.sigma.explain(x, column=1)
    a, b = params.calibration
    p = 1.0 / (1.0 + np.exp(-(a * raw + b)))
    return Scored(p_genuine=p, contrib=contrib, label_p=params.labels.predict(x))


def gate(m: Measured, families: tuple[str, ...] = GATES) -> tuple[Label | None, str] | None:
    """A fixed verdict for a failure the reference data is too thin to teach, or for a
    follow-up the model cannot see.

    Returns ``(label, why)``, or None to let the model decide. A None label means "not
    genuine, let the label model say which failure" (a quiz frame may wrap a re-ask);
    ``plausible_followup`` means genuine.
    """
    move = "reply" in families and m.makes_move
    verdict = surface_verdict(m.rules) if "surface" in families else None
    if verdict is not None and not (move and verdict[0] == "degenerate_short"):
        return verdict
    v = m.values
    if "task" in families:
        if v["framed_task"]:
            return None, "a quiz or exam frame around a self-contained question"
        acts = v["revision"] or v["challenge"] or v["clarify"]
        if v["word_problem"] and v["new_numbers"] >= WORD_PROBLEM_NUMBERS and not acts:
            return None, (
                f"a word problem with {int(v['new_numbers'])} numbers new to the conversation"
            )
    if "voice" in families and (voice := _voice(m)) is not None:
        return voice
    if "act" in families and m.acts_on_answer:
        return "plausible_followup", "a short request to revise or carry on the answer"
    if "reply" in families and m.hands_over:
        return "plausible_followup", "hands over what the answer asked for"
    if move:
        return "plausible_followup", "makes the move the answer handed over"
    return _echo(m) if "voice" in families else None


def _voice(m: Measured) -> tuple[Label, str] | None:
    """The answering side's voice: a phrase only it says, or an offer or check-in."""
    if m.rules.assistant_voice is not None:
        return "assistant_turn_restate", f"the assistant's voice {m.rules.assistant_voice!r}"
    if m.values["offer"]:
        return "assistant_turn_restate", "an assistant's offer or check-in"
    return None


def _echo(m: Measured) -> tuple[Label, str] | None:
    """A re-ask with nothing new, or the answer's own closing question asked back.

    Each needs the absence of every dialogue-act cue ("why", "make it", "are you sure",
    a pointer back), since a follow-up may quote the request while asking something new.
    """
    v = m.values
    acts = v["revision"] or v["challenge"] or v["clarify"] or v["pointer"] or v["report_back"]
    if acts or not v["question"]:
        return None
    reask = max(v["q_last_sim"], v["q_dice"])
    if not v["new_intent"] and reask >= REASK_SIMILARITY:
        return "previous_turn_restate", f"re-asks the request (similarity {reask:.2f})"
    echo = v["emb_a_last"]
    if v["answer_asks_details"] and echo >= ECHO_SIMILARITY:
        return "assistant_turn_restate", f"asks the answer's own question back ({echo:.2f})"
    return None


def decide(m: Measured, s: Scored, i: int, params: Params) -> tuple[bool, Label, str]:
    """σ, label and rationale for row ``i`` of a scored batch."""
    p = round(float(s.p_genuine[i]), 4)  # the probability the verdict reports, and states
    gated = gate(m, params.gates)
    if gated is not None and gated[0] == "plausible_followup":
        return True, "plausible_followup", f"P(genuine) {p:.2f}; genuine by gate: {gated[1]}"
    if gated is not None and gated[0] is not None:
        return False, gated[0], gated[1]
    if gated is None and p >= params.threshold:
        return True, "plausible_followup", f"P(genuine) {p:.2f}: {evidence(m, s, i, up=True)}"
    label, lp = _degenerate_label(s, i, params)
    why = gated[1] if gated is not None else evidence(m, s, i, up=False)
    return False, label, f"P(genuine) {p:.2f}; {label} ({lp:.2f}): {why}"


def _degenerate_label(s: Scored, i: int, params: Params) -> tuple[Label, float]:
    probs = s.label_p[i]
    best = int(np.argmax(probs))
    return params.label_classes[best], float(probs[best])


def evidence(m: Measured, s: Scored, i: int, *, up: bool, top: int = 2) -> str:
    """The features that moved P(genuine) most in the verdict's direction, with values."""
    contrib = s.contrib[i] if up else -s.contrib[i]
    order = [j for j in np.argsort(-contrib)[:top] if contrib[j] > 0]
    if not order:
        return "no single feature stands out"
    features = [ALL_FEATURES[j] for j in order]
    return "; ".join(f"{f.says} {f.show(m.values[f.name])}" for f in features)


class OfflineJudge(Judge):
    """The learned offline default; see the module docstring. Option: ``threshold``."""

    def __init__(self, spec: Spec, params: Params | None = None, **kwargs: object) -> None:
        super().__init__(spec)
        self.params = params or shipped_params()
        self.threshold = _threshold(spec, self.params)
        self.params = _with_threshold(self.params, self.threshold)
        self.version = f"{CODE_VERSION}+{self.params.digest[:8]}"

    def judge(self, inputs: list[JudgeInput]) -> list[Judgment]:
        measured: list[tuple[Measured, TurnMeaning] | None] = []
        for item in inputs:
            try:
                base = measure_turn(item.messages, item.user_turn)
                measured.append((base, measure_meaning(item.messages, item.user_turn)))
            except Exception as exc:  # one odd row must not sink the batch
                log.warning("offline judge failed on %s: %s", item.id, exc)
                measured.append(None)
        ok = [(x, item.user_turn) for x, item in zip(measured, inputs, strict=True) if x]
        rows = self._with_head([x for x, _ in ok], [t for _, t in ok]) if ok else []
        scored = score(self.params, np.array([m.vector() for m in rows])) if rows else None
        out, k = [], 0
        for x in measured:
            if x is None or scored is None:
                out.append(self._error())
                continue
            out.append(self._verdict(rows[k], scored, k))
            k += 1
        return out

    def _with_head(
        self, parts: list[tuple[Measured, TurnMeaning]], turns: list[str]
    ) -> list[Measured]:
        """Hand-made features, similarities and the act head (one call for the batch)."""
        emb = np.array([meaning.embedding for _, meaning in parts])
        head = np.round(self.params.head.proba(head_inputs(turns, emb)), 4)
        out = []
        for (base, meaning), p in zip(parts, head, strict=True):
            extra = dict(zip(SIMILARITIES, meaning.similarities.tolist(), strict=True))
            extra |= dict(zip(HEAD_NAMES, p.tolist(), strict=True))
            values = {**base.values, **extra}
            out.append(replace(base, values=values, features=ALL_FEATURES))
        return out

    def _verdict(self, m: Measured, s: Scored, i: int) -> Judgment:
        genuine, label, why = decide(m, s, i, self.params)
        return Judgment(
            self.id,
            genuine,
            label,
            why,
            "ok",
            {"calls": 0},
            probability=round(float(s.p_genuine[i]), 4),
            challenges_answer=m.challenges_answer,
            version=self.version,
        )

    def _error(self) -> Judgment:
        why = "error: could not measure the turn"
        return Judgment(self.id, None, None, why, "error", version=self.version)


def _threshold(spec: Spec, params: Params) -> float:
    """``offline?threshold=T`` (checked by the registry), else the fitted cut."""
    value = registry.JUDGES["offline"].parse_options(spec.options).get("threshold")
    return params.threshold if value is None else float(value)


def _with_threshold(params: Params, threshold: float) -> Params:
    if threshold == params.threshold:
        return params
    raw = {**params.raw, "sigma": {**params.raw["sigma"], "threshold": threshold}}
    return Params.from_json(raw)
