"""The offline judge's features: numbers that separate a follow-up from each failure mode.

The rules judge asks "are the turn's words in the conversation?", which a paraphrased
re-ask ("How much did James pay?") and a same-topic new problem both pass. These features
ask sharper questions, each aimed at one failure mode of ``paper.md``:

- engagement with the answer, as opposed to the question: content that only the answer
  introduced (``answer_new``);
- a re-ask: sentence-level similarity to the request's final sentence, numbers included
  (``q_last_sim``), overall similarity and how much of the request is reproduced;
- a new task: numbers and names the conversation never mentioned, a self-contained word
  problem, a quiz frame, a stock advice question;
- dialogue acts of a user: "you", revision verbs, challenges, clarifying questions,
  reporting back; and the speaker's voice (the assistant's phrases, answer-style layout);
- the rules judge's artefact checks (template tokens, mojibake, loops, symbol soup).

Every feature is a pure function of ``(messages, turn)``; context-side work is cached per
conversation (``rules_features.context_view`` and ``_extras``), since a run judges many
turns against the same context. ``FEATURES`` fixes the order the fitted model expects.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np

from userturn.judges import offline_cues as cue
from userturn.judges.challenge import challenges_answer
from userturn.judges.rules_features import (
    TextFeatures,
    char_grams,
    char_overlap,
    content_units,
    context_key,
    context_view,
    measure,
    words,
)
from userturn.types import Message

Kind = Literal["share", "count", "flag"]


@dataclass(frozen=True)
class Feature:
    name: str
    says: str
    """What a high value means, for rationales ("numbers absent from the conversation")."""
    kind: Kind = "share"
    """A share in [0, 1], a count, or a yes/no flag. Counts enter the model as
    log(1 + x): the tenth new number says less than the first."""

    @property
    def log(self) -> bool:
        return self.kind == "count"

    def show(self, value: float) -> str:
        """The value as a rationale states it ("= 3", "yes", "0.42")."""
        if self.kind == "count":
            return f"= {int(value)}"
        if self.kind == "flag":
            return "yes" if value else "no"
        return f"{value:.2f}"


FEATURES: tuple[Feature, ...] = (
    Feature("words", "words", "count"),
    Feature("question", "asks a question", "flag"),
    Feature("sim_q", "share of content words from the user's request"),
    Feature("sim_a", "share of content words from the answer"),
    Feature("grounding", "share of content words found in the conversation"),
    Feature("answer_new", "share of content words that only the answer introduced"),
    Feature("unseen", "content words new to the conversation", "count"),
    Feature("q_last_sim", "similarity of a sentence to the request's final sentence"),
    Feature("q_dice", "similarity to the user's request"),
    Feature("q_cover", "share of the request's content reproduced"),
    Feature("new_intent", "question words the request did not use", "count"),
    Feature("prior_user_sim", "similarity to an earlier user turn"),
    Feature("char_q", "text copied verbatim from the request"),
    Feature("char_a", "text copied verbatim from the answer"),
    Feature("new_numbers", "numbers absent from the conversation", "count"),
    Feature("new_names", "names absent from the conversation", "count"),
    Feature("word_problem", "a self-contained word problem", "flag"),
    Feature("framed_task", "a quiz or exam frame", "flag"),
    Feature("generic", "a stock advice or trivia question", "flag"),
    Feature("second_person", "addresses the assistant as 'you'", "flag"),
    Feature("first_person", "speaks as 'I'", "flag"),
    Feature("pointer", "points back at the answer", "flag"),
    Feature("revision", "asks to revise or re-present the answer", "flag"),
    Feature("clarify", "asks about something in the answer", "flag"),
    Feature("challenge", "disputes the answer", "flag"),
    Feature("report_back", "reports back or replies to the assistant", "flag"),
    Feature("question_opener", "opens with a question word", "flag"),
    Feature("assistant_voice", "speaks in the assistant's voice", "flag"),
    Feature("greeting", "opens with a greeting", "flag"),
    Feature("offer", "an assistant's offer or check-in", "flag"),
    Feature("markdown", "answer-style layout (lists, headings, code)", "flag"),
    Feature("meta", "assistant-side planning", "flag"),
    Feature("artifact", "template token or mojibake", "flag"),
    Feature("letters", "share of letters"),
    Feature("scripts", "writing-system switches", "count"),
    Feature("repetition", "repeated word trigrams"),
    Feature("no_content", "no content words", "flag"),
    Feature("replies_to_question", "replies to a question the answer asked", "flag"),
    Feature("continues_cut", "continues an answer cut off mid-sentence", "flag"),
    Feature("ungrounded", "no content word from the conversation, no act", "flag"),
    Feature("anaphora", "points back with a pronoun ('it', 'that')", "flag"),
    Feature("connective", "opens by continuing the exchange ('and', 'so')", "flag"),
    Feature("personal_numbers", "gives personal details with figures", "flag"),
    Feature("narration", "describes the exchange from outside", "flag"),
    Feature("rating", "grades the answer", "flag"),
    Feature("conclusion", "concludes like a solution ('the answer is')", "flag"),
    Feature("list_item", "opens with a list item", "flag"),
    Feature("answer_asks_details", "the answer asked the user for something", "flag"),
    Feature("advice", "gives advice as the answering side does", "flag"),
    Feature("non_latin", "share of letters outside ASCII"),
    Feature("lower_start", "starts lower-case", "flag"),
    Feature("ends_question", "ends with a question mark", "flag"),
    Feature("thanks_only", "thanks without asking anything", "flag"),
    Feature("definitional", "a textbook question with no tie to the answer", "flag"),
    Feature("code", "code pasted in", "flag"),
    Feature("continue_request", "asks to carry the text on", "flag"),
)
NAMES: tuple[str, ...] = tuple(f.name for f in FEATURES)


@dataclass(frozen=True)
class Measured:
    """One turn's features: the rules judge's measurements plus the named values."""

    rules: TextFeatures
    values: dict[str, float]
    challenges_answer: bool
    features: tuple[Feature, ...] = ()
    """The features ``vector`` lays out, in order (empty: ``FEATURES``)."""
    acts_on_answer: bool = False
    """A short request to revise or carry on the answer (``offline_cues.acts_on_answer``):
    read by a gate, not by the model."""
    hands_over: bool = False
    """What the answer asked for, handed over (``offline_cues.hands_over``): read by a gate."""
    makes_move: bool = False
    """The move the answer handed the user, made (``offline_cues.makes_move``): read by a
    gate, before the surface gate's word count."""

    def vector(self) -> np.ndarray:
        """Values in feature order, counts log-transformed (what the model reads)."""
        return np.array(
            [
                math.log1p(self.values[f.name]) if f.log else self.values[f.name]
                for f in (self.features or FEATURES)
            ]
        )


@dataclass(frozen=True)
class _Extras:
    """Context-side sets the rules' ``ContextView`` doesn't hold."""

    q_bag: frozenset[str]
    q_words: frozenset[str]
    q_last_bag: frozenset[str]
    prior_user_bags: tuple[frozenset[str], ...]
    numbers: frozenset[str]
    words: frozenset[str]
    a_new: frozenset[str]
    answer_asks: bool
    answer_cut: bool
    asks_details: bool
    asks_in_particular: bool
    invites_move: bool


def numbers(text: str) -> frozenset[str]:
    """Numbers as written, without thousands separators or trailing decimal zeros."""
    out = set()
    for raw in cue.NUMBER.findall(text):
        n = raw.replace(",", "")
        out.add(n.rstrip("0").rstrip(".") if "." in n else n)
    return frozenset(out)


def bag(text: str) -> frozenset[str]:
    """Content units plus numbers: what a sentence is about, figures included."""
    return content_units(text) | numbers(text)


def dice(a: AbstractSet[str], b: AbstractSet[str]) -> float:
    return 2 * len(a & b) / (len(a) + len(b)) if a and b else 0.0


def sentences(text: str) -> list[str]:
    return [s for s in cue.SENTENCE_END.split(text.strip()) if s.strip()]


def extras(messages: Sequence[Message]) -> _Extras:
    return _extras(context_key(messages))


@lru_cache(maxsize=2048)
def _extras(key: tuple[tuple[str, str], ...]) -> _Extras:
    ctx = context_view([{"role": r, "content": c} for r, c in key])
    users = [c for r, c in key if r == "user"]
    q_sents = sentences(ctx.question)
    tail = ctx.answer.rstrip()[-cue.ANSWER_TAIL :]
    return _Extras(
        q_bag=bag(ctx.question),
        q_words=frozenset(words(ctx.question)),
        q_last_bag=bag(q_sents[-1]) if q_sents else frozenset(),
        prior_user_bags=tuple(bag(u) for u in users[:-1]),
        numbers=numbers(ctx.text),
        words=frozenset(w.lower() for w in cue.CAPITALISED.findall(ctx.text))
        | frozenset(ctx.text.lower().split()),
        a_new=ctx.a_units - ctx.q_units,
        answer_asks="?" in tail[-120:],
        answer_cut=bool(tail) and tail[-1] not in ".!?)\"'`*:”’",
        asks_details=cue.ASKS_FOR_DETAILS.search(tail) is not None or tail.endswith("?"),
        asks_in_particular=cue.asks_for_input(ctx.answer),
        invites_move=cue.invites_move(ctx.answer),
    )


def measure_turn(messages: Sequence[Message], turn: str) -> Measured:
    """All features of ``turn`` against the conversation ``messages``."""
    rules = measure(messages, turn)
    ctx, ex = context_view(messages), extras(messages)
    units = content_units(turn)
    turn_bag = units | numbers(turn)
    head = " ".join(turn.split()[:40])
    values = {
        "words": float(rules.n_words),
        "question": float("?" in turn),
        "sim_q": rules.sim_q,
        "sim_a": rules.sim_a,
        "grounding": rules.grounding,
        "answer_new": len(units & ex.a_new) / len(units) if units else 0.0,
        "unseen": float(len(units - ctx.units)),
        "q_last_sim": max((dice(bag(s), ex.q_last_bag) for s in sentences(turn)), default=0.0),
        "q_dice": dice(turn_bag, ex.q_bag),
        "q_cover": len(ex.q_bag & turn_bag) / len(ex.q_bag) if ex.q_bag else 0.0,
        "new_intent": float(len((set(words(turn)) & cue.INTENT_WORDS) - ex.q_words)),
        "prior_user_sim": max((dice(turn_bag, b) for b in ex.prior_user_bags), default=0.0),
        **_copying(turn, messages),
        **_novelty(turn, ex),
        **_acts(turn, head, rules, ex),
        **_surface(rules),
    }
    values |= _discourse(turn, rules, ex, values)
    flagged = challenges_answer(messages, turn)  # the validated detector, not the feature cue
    return Measured(
        rules=rules, values=values, challenges_answer=flagged,
        acts_on_answer=cue.acts_on_answer(turn),
        hands_over=cue.hands_over(turn, ex.asks_in_particular),
        makes_move=cue.makes_move(turn, ex.invites_move),
    )  # fmt: skip


def _copying(turn: str, messages: Sequence[Message]) -> dict[str, float]:
    ctx, grams = context_view(messages), char_grams(turn)
    return {"char_q": char_overlap(grams, ctx.q_grams), "char_a": char_overlap(grams, ctx.a_grams)}


def _novelty(turn: str, ex: _Extras) -> dict[str, float]:
    """Figures and names the conversation never mentioned: the marks of a new task."""
    new_numbers = numbers(turn) - ex.numbers
    names = {w.lower() for w in cue.CAPITALISED.findall(turn)} - ex.words
    problem = cue.WORD_PROBLEM.search(turn) is not None and bool(new_numbers)
    return {
        "new_numbers": float(len(new_numbers)),
        "new_names": float(len(names)),
        "word_problem": float(problem),
        "framed_task": float(cue.FRAMED_TASK.search(cue.head(turn)) is not None),
        "generic": float(cue.GENERIC.search(turn) is not None),
    }


def _acts(turn: str, head: str, rules: TextFeatures, ex: _Extras) -> dict[str, float]:
    """Dialogue acts and voice, read from the first 40 words where openings matter."""
    opens_reply = cue.REPORT_BACK.search(head) is not None
    return {
        "second_person": float(cue.SECOND_PERSON.search(cue.head(turn)) is not None),
        "first_person": float(cue.FIRST_PERSON.search(head) is not None),
        "pointer": float(rules.reference is not None),
        "revision": float(cue.REVISION.search(head) is not None),
        "clarify": float(cue.CLARIFY.search(head) is not None),
        "challenge": float(cue.challenges(turn)),
        "report_back": float(opens_reply),
        "question_opener": float(cue.QUESTION_OPENER.search(head) is not None),
        "assistant_voice": float(rules.assistant_voice is not None),
        "greeting": float(cue.GREETING.search(head) is not None),
        "offer": float(cue.ASSISTANT_OFFER.search(cue.head(turn)) is not None),
        "markdown": float(cue.MARKDOWN.search(turn) is not None),
        "replies_to_question": float(ex.answer_asks and opens_reply),
        "continues_cut": float(ex.answer_cut and turn[:1].islower()),
    }


def _surface(rules: TextFeatures) -> dict[str, float]:
    return {
        "meta": float(rules.meta_planning is not None),
        "artifact": float(rules.artifact is not None),
        "letters": rules.letter_ratio,
        "scripts": float(rules.script_switches),
        "repetition": rules.repetition,
        "no_content": float(rules.n_meaningful == 0),
    }


def _discourse(
    turn: str, rules: TextFeatures, ex: _Extras, values: dict[str, float]
) -> dict[str, float]:
    """Whether the turn leans on the exchange, hands over what was asked, or speaks from
    outside or from the answering side (``offline_cues``' discourse cues)."""
    text = turn.strip()
    head = cue.head(text)
    letters = [c for c in text if c.isalpha()]
    acts = ("revision", "challenge", "clarify", "pointer", "report_back")
    anaphora = cue.ANAPHORA.search(text) is not None
    return {
        "ungrounded": float(
            rules.grounding == 0 and rules.n_units >= 2 and not any(values[a] for a in acts)
        ),
        "anaphora": float(anaphora),
        "connective": float(cue.CONNECTIVE.search(head) is not None),
        "personal_numbers": float(
            cue.PERSONAL.search(text) is not None and any(c.isdigit() for c in text)
        ),
        "narration": float(cue.NARRATION.search(head) is not None),
        "rating": float(cue.RATING.search(text) is not None),
        "conclusion": float(cue.CONCLUSION.search(text) is not None),
        "list_item": float(cue.LIST_ITEM.search(text) is not None),
        "answer_asks_details": float(ex.asks_details),
        "advice": float(cue.ADVICE.search(text) is not None),
        "non_latin": sum(not c.isascii() for c in letters) / len(letters) if letters else 0.0,
        "lower_start": float(text[:1].islower()),
        "ends_question": float(text.endswith("?")),
        "thanks_only": float(
            cue.THANKS.search(text) is not None and cue.REQUEST.search(text) is None
        ),
        "definitional": float(cue.DEFINITIONAL.search(text) is not None and not anaphora),
        "code": float(cue.CODE.search(text) is not None),
        "continue_request": float(cue.CONTINUE.search(text) is not None),
    }
