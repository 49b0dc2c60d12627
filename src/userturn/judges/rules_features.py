"""Threshold-free text measurements behind the rules judge.

Everything here is a pure function of ``(context, user turn)`` so it can be computed once
per row and re-thresholded cheaply: ``bench/judge_cv.py`` fits thresholds hundreds of
times on the same features. The decisions (which label wins) live in ``rules.py``.

Lexical overlap is measured on *content units*: lower-cased words of 3+ letters that are
not English function words, stemmed to their first 5 letters (so ``difference`` and
``differences`` match), plus character bigrams for CJK text, which has no spaces. This is
ROUGE-1 recall on a crude stem, and is language-agnostic enough for the multilingual
HealthBench conversations.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from functools import lru_cache
from itertools import pairwise

from userturn.types import Message

_CJK = r"\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_LATINISH_WORD = re.compile(rf"(?:(?![{_CJK}])[^\W\d_])+")
_STEM = 5


def _wordset(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS = _wordset(
    """a an the and or but if then so of to in on at by for with from as is are was were be
    been being do does did done have has had i me my we our you your he she it its they them
    their this that these those what which who whom how why when where can could would should
    will shall may might must not no yes there here about into over than too very just also
    only some any all more most such own same other each few both out up down off again once
    get got let lets make made one two use used like want need know tell give say please
    thing things way well much many really help explain provide write question answer
    example information following think new"""
)

FILLERS = _wordset(
    """thank thanks thx okay great cool nice perfect awesome good yeah yep nope sure alright
    hello hey bye wow hmm fine right helpful helps"""
)
"""Words that carry politeness, not content: "Thanks!" alone is a degenerate turn."""
_FILLER_STEMS = frozenset(w[:_STEM] for w in FILLERS)


@dataclass(frozen=True)
class TextFeatures:
    """Threshold-free measurements of one user turn against its context."""

    n_words: int
    """Word tokens (each CJK character counts as one word)."""
    n_units: int
    """Distinct content units (see module docstring)."""
    n_meaningful: int
    """Content units that are not politeness fillers."""
    sim_q: float
    """Share of the turn's content units found in the previous user message."""
    sim_a: float
    """Share of the turn's content units found in the assistant's answer."""
    closer_to_q: bool
    """Verbatim overlap (character 5-grams) is higher with q than with a: which one a
    restatement copies when the answer itself repeats the prompt's words."""
    grounding: float
    """Share of the turn's content units found anywhere in the conversation."""
    repetition: float
    """Share of word trigrams that repeat an earlier trigram (loops score near 1)."""
    letter_ratio: float
    """Letters among non-space characters; garbage and symbol soup score low."""
    script_switches: int
    """Changes of writing system between consecutive letters (junk tokens switch often)."""
    artifact: str | None
    """A template/role token, mojibake or the like that the context does not contain."""
    meta_planning: str | None
    """An assistant-side planning phrase ("Here's a thinking process", "The user wants")."""
    assistant_voice: str | None
    """A phrase only the answering side says ("To solve this", "Certainly! Here are")."""
    reference: str | None
    """A pointer back into the conversation ("shorten this", "the result", "your code")."""
    user_voice: bool
    """The first 10 words speak as the asker: first person, or a request to "you"."""


def words(text: str) -> list[str]:
    """Lower-cased word tokens; CJK runs are split into single characters."""
    spaced = _CJK_RUN.sub(lambda m: " " + " ".join(m.group()) + " ", text.lower())
    return re.findall(rf"[{_CJK}]|{_LATINISH_WORD.pattern}(?:['’]\w+)?", spaced)


@lru_cache(maxsize=8192)
def content_units(text: str) -> frozenset[str]:
    """Stemmed content words plus CJK character bigrams (see the module docstring).

    Cached: the rules and offline features both ask for the same turn's units."""
    units = {
        w[:_STEM]
        for w in _LATINISH_WORD.findall(text.lower())
        if len(w) >= 3 and w not in STOPWORDS
    }
    for run in _CJK_RUN.findall(text):
        units.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return frozenset(units)


def containment(units: AbstractSet[str], reference: AbstractSet[str]) -> float:
    """Share of ``units`` present in ``reference`` (0 when there is nothing to compare)."""
    return len(units & reference) / len(units) if units else 0.0


def char_grams(text: str, n: int = 5) -> frozenset[str]:
    """Character n-grams of the case- and space-folded text."""
    t = " ".join(text.lower().split())
    shifted = (t[i:] for i in range(n))  # zip stops at the shortest: the last full n-gram
    return frozenset(map("".join, zip(*shifted, strict=False)))


def char_overlap(grams: frozenset[str], reference: frozenset[str]) -> float:
    """Share of a text's character n-grams found in the reference's (0 for no n-grams)."""
    return len(grams & reference) / len(grams) if grams else 0.0


def repetition(tokens: Sequence[str], n: int = 3) -> float:
    """1 - distinct/total word n-grams; 0 for texts too short to loop."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    if len(grams) < 4:
        return 0.0
    return 1.0 - len(set(grams)) / len(grams)


def letter_ratio(text: str) -> float:
    """Letters among non-space characters; 1.0 for texts too short to judge (< 20 chars)."""
    chars = [c for c in text if not c.isspace()]
    return sum(c.isalpha() for c in chars) / len(chars) if len(chars) >= 20 else 1.0


_SCRIPTS = (
    ("cjk", 0x3040, 0x9FFF),
    ("hangul", 0xAC00, 0xD7AF),
    ("cyrillic", 0x0400, 0x04FF),
    ("greek", 0x0370, 0x03FF),
    ("arabic", 0x0600, 0x06FF),
    ("hebrew", 0x0590, 0x05FF),
    ("indic", 0x0900, 0x0DFF),
    ("thai", 0x0E00, 0x0E7F),
)


def _script(ch: str) -> str:
    """A coarse writing-system tag; enough to notice Latin text sprinkled with junk tokens."""
    code = ord(ch)
    for name, lo, hi in _SCRIPTS:
        if lo <= code <= hi:
            return name
    return "latin" if code < 0x250 else "other"


def script_switches(text: str) -> int:
    """How often consecutive letters change writing system ("other技术" switches twice)."""
    if text.isascii():  # the common case, and one writing system by construction
        return 0
    letters = [_script(c) for c in text if c.isalpha()]
    return sum(a != b for a, b in pairwise(letters))


def last_user_and_answer(messages: Sequence[Message]) -> tuple[str, str]:
    """(q, a): the last user message and the final assistant turn ("" when absent)."""
    answer = str(messages[-1].get("content") or "") if messages else ""
    if messages and messages[-1].get("role") != "assistant":
        answer = ""
    question = next(
        (str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), ""
    )
    return question, answer


@dataclass(frozen=True)
class ContextView:
    """What every turn judged against one conversation needs from it, computed once.

    A run judges k samples x temperatures x judges against the same context, so the
    context's units, n-grams and leaks are cached (``context_view``) rather than
    recomputed per turn; that keeps the offline judges fast on long contexts.
    """

    question: str
    answer: str
    text: str
    """All message contents joined by spaces."""
    q_units: frozenset[str]
    a_units: frozenset[str]
    units: frozenset[str]
    q_grams: frozenset[str]
    a_grams: frozenset[str]
    leaks: tuple[frozenset[str], ...]
    """Per ``_LEAKS`` pattern, the matches the context already contains."""


def context_key(messages: Sequence[Message]) -> tuple[tuple[str, str], ...]:
    """A hashable stand-in for the messages (role and content are all a judge reads)."""
    return tuple((str(m.get("role") or ""), str(m.get("content") or "")) for m in messages)


def context_view(messages: Sequence[Message]) -> ContextView:
    """The cached ``ContextView`` of ``messages``."""
    return _view(context_key(messages))


@lru_cache(maxsize=2048)
def _view(key: tuple[tuple[str, str], ...]) -> ContextView:
    messages = [{"role": role, "content": content} for role, content in key]
    question, answer = last_user_and_answer(messages)
    text = " ".join(content for _, content in key)
    return ContextView(
        question=question,
        answer=answer,
        text=text,
        q_units=content_units(question),
        a_units=content_units(answer),
        units=content_units(text),
        q_grams=char_grams(question),
        a_grams=char_grams(answer),
        leaks=leaks_in(text),
    )


def measure(messages: Sequence[Message], turn: str) -> TextFeatures:
    """All threshold-free features of ``turn`` given the conversation ``messages``."""
    ctx = context_view(messages)
    units = content_units(turn)
    tokens = words(turn)
    grams = char_grams(turn)
    return TextFeatures(
        n_words=len(tokens),
        n_units=len(units),
        n_meaningful=len(units - _FILLER_STEMS),
        sim_q=containment(units, ctx.q_units),
        sim_a=containment(units, ctx.a_units),
        closer_to_q=char_overlap(grams, ctx.q_grams) > char_overlap(grams, ctx.a_grams),
        grounding=containment(units, ctx.units),
        repetition=repetition(tokens),
        letter_ratio=letter_ratio(turn),
        script_switches=script_switches(turn),
        artifact=_artifact_in(turn, ctx),
        meta_planning=first_match(META_PLANNING, turn[:600]),
        assistant_voice=first_match(ASSISTANT_VOICE, turn),
        reference=first_match(REFERENCE, turn),
        user_voice=USER_VOICE.search(" ".join(turn.split()[:10])) is not None,
    )


# --- phrase detectors -------------------------------------------------------------------
# Each list names one failure mode of the paper; patterns are deliberately specific, since a
# false hit on a real user ("I need to check with my doctor") costs a genuine follow-up.

_TEMPLATE_TOKEN = re.compile(
    r"<\|[A-Za-z_]{2,24}\|>|</?(?:start|end)_of_turn>|\[/?INST\]|<</?SYS>>|</?s>"
    r"|<(?:bos|eos|pad|unk)>|\b(?:start|end)_header_id\b"
)
_LEAKS = (
    # a role header left on its own line, or glued to a junk token ("mendatangmodel")
    re.compile(r"(?im)^[ \t]*(?:user|assistant|model|system)[ \t]*(?::[ \t]*)?$"),
    re.compile(r"(?<=[^\W\d_])(?:user|model|assistant)(?=[ \t]*\n)"),
    # UTF-8 read as Latin-1
    re.compile(r"Ã[\u0080-\u00bf]|â€|Â[\u00a0-\u00bf]|\ufffd"),
)
_GLUED_ROLE = _LEAKS[1]
"""Matches only the role name; its token is the whole non-space run it ends (see
``_leak_tokens``). Written as ``\\S*`` plus the name, the pattern would re-scan that run
from each of its characters: quadratic, minutes for one long base64 string."""
_LEAK_NEEDLES = (
    ("user", "assistant", "model", "system"),
    ("user", "model", "assistant"),
    ("ã", "â€", "â", "\ufffd"),
)
"""Per ``_LEAKS`` pattern, literals (lower-cased) that any match must contain."""
_REAL_WORDS = _wordset(
    "remodel premodel submodel supermodel superuser poweruser multiuser enduser nonuser"
)
"""Words that end in a role name on their own; anything else glued to one is debris."""

META_PLANNING = tuple(
    re.compile(p, re.IGNORECASE | re.MULTILINE)
    for p in (
        r"here(?:'s| is) (?:a |my )?(?:thinking|thought) process",
        r"^[^\w\n]*(?:thinking|thought) process\b",
        r"</?think>",
        r"^[^\w\n]*(?:(?:okay|ok|alright|so|hmm+|well)[,.]?\s+)*let me (?:think|analy[sz]e|break"
        r"|figure|plan|draft|re-?read|recall|work (?:through|out))",
        r"\b(?:the|this) user(?:'s)? (?:wants|is asking|asks|asked|has asked|request|question"
        r"|query|prompt|message)",
        r"\b(?:check|verify|satisfy|meet|re-?read)(?:ing)? (?:the|all|these|those|each|every)"
        r" (?:\w+ ){0,2}(?:constraints?|requirements?|instructions?)\b",
        r"\b(?:analy[sz]e|deconstruct|parse)(?:ing)? the (?:\w+ )?(?:request|prompt|query|task)",
        r"\b(?:i|we) (?:need|have|should|must) to (?:respond|reply|answer the|produce|output"
        r"|draft|write (?:a|the|my) (?:response|answer|reply))\b",
        r"\b(?:my|the) (?:response|answer|reply|output) (?:should|must|needs to)\b",
    )
)

ASSISTANT_VOICE = tuple(
    re.compile(p, re.IGNORECASE | re.MULTILINE)
    for p in (
        r"^[^\w\n]*to (?:solve|determine|find|calculate|compute|verify|evaluate) (?:this|the|how"
        r"|whether|what|which)\b",
        r"^[^\w\n]*(?:sure|certainly|absolutely|of course)[!,.]?\s+(?:here|below|i(?:'d| would) be"
        r" (?:happy|glad)|i can help|let(?:'s| me))",
        r"^[^\w\n]*let's (?:break|solve|calculate|compute|start by|go through|denote|use|find"
        r"|determine|verify)\b",
        r"^[^\w\n]*step \d+\s*[:.]",
        r"\bwe (?:need|have) to (?:follow|first|break)\b",
        r"i(?:'|’)?m (?:sorry|afraid)[^.\n]{0,40}\b(?:can(?:not|'t|’t)|unable to|not able to)"
        r" (?:assist|help|provide|fulfill|comply|answer|give)",
        r"\bi(?:'|’)?m (?:unable|not able) to (?:assist|help|provide)",
        r"\bas an ai\b|\bas a (?:chatbot|language model|virtual assistant|ai (?:model|assistant))",
        r"^[^\S\n]*(?:\d+\.|[-*])\s+\*\*[^*\n]+\*\*",
        r"^#{1,4} \S",
        # a question answered by the turn itself
        r"\?[ \t]*\n[^\S\n]*\n\s*(?:yes|no|certainly|sure|absolutely|of course)\b[,!.]",
    )
)

REFERENCE = (
    re.compile(
        r"\b(?:this|these|those|them)\b|^that\b|\b(?:is|does|was|about|by|mean) that\b"
        r"|\b(?:make|do|put|turn|rewrite|change|convert|explain|shorten|simplify|expand|translate"
        r"|summari[sz]e|format|fix|continue|try|run) (?:it|that)\b"
        r"|\byour (?:answer|response|reply|explanation|code|list|example|suggestions?|script"
        r"|solution|math|calculation|story|previous)"
        r"|\byou (?:said|mentioned|wrote|suggested|listed|gave|described|explained)"
        r"|\bthe (?:result|answer|response|code|script|list|story|example|problem|solution"
        r"|output|steps?|options?|above)\b"
        r"|\bsteps? \d+\b",
        re.IGNORECASE,
    ),
    # bare continuation, revision and challenge requests are about the previous answer
    re.compile(
        r"^\W*(?:(?:please|now|ok(?:ay)?|and|but|so)\W+)*(?:continue|go on|keep going|go ahead"
        r"|more|elaborate|expand|finish|why|how so|really|are you sure|next|what about|how about"
        r"|translate|rewrite|rephrase|paraphrase|summari[sz]e|shorten|simplify"
        r"|继续|为什么|continua|continúa|sigue)\b"
        r"|(?<![$.,\d])\b(?:\d+|a few|some|any|another) more\b(?! than)"
        r"|\bmore (?:examples?|details?|ideas?|options?)\b",
        re.IGNORECASE,
    ),
)

USER_VOICE = re.compile(
    r"\b(?:i|i'm|i’m|i've|i’ve|i'd|i’d|my|me|please|can you|could you|would you|your)\b",
    re.IGNORECASE,
)


def first_match(patterns: Sequence[re.Pattern[str]], text: str) -> str | None:
    for pattern in patterns:
        hit = pattern.search(text)
        if hit:
            return hit.group(0).strip()[:40] or hit.group(0)[:40]
    return None


def find_artifact(turn: str, context: str) -> str | None:
    """A template token anywhere, or a role leak/mojibake the context didn't already contain.

    Copying the answer's own debris is a restatement, not a new artifact, so leaks are
    checked against the context; template tokens never belong in a user turn.
    """
    return _find_artifact(turn, leaks_in(context))


def leaks_in(text: str) -> tuple[frozenset[str], ...]:
    """Per ``_LEAKS`` pattern, the leak tokens ``text`` contains."""
    return tuple(frozenset(_leak_tokens(p, text)) for p in _LEAKS)


def _leak_tokens(pattern: re.Pattern[str], text: str) -> Iterator[str]:
    """The stripped tokens of ``pattern``'s matches; a glued role name extends back to the
    start of its non-space run, found with one reverse scan per match (linear overall:
    each run ends in at most one match, since the role must be followed by a newline)."""
    for m in pattern.finditer(text):
        start = m.start()
        if pattern is _GLUED_ROLE:
            while start > 0 and not text[start - 1].isspace():
                start -= 1
        yield text[start : m.end()].strip()


def _artifact_in(turn: str, ctx: ContextView) -> str | None:
    return _find_artifact(turn, ctx.leaks)


def _find_artifact(turn: str, seen: tuple[frozenset[str], ...]) -> str | None:
    hit = _TEMPLATE_TOKEN.search(turn)
    if hit:
        return hit.group(0)
    lowered = turn.lower()
    for pattern, known, needles in zip(_LEAKS, seen, _LEAK_NEEDLES, strict=True):
        if not any(n in lowered for n in needles):
            continue  # the pattern needs one of these literals: skip the costly scan
        for token in _leak_tokens(pattern, turn):
            if token not in known and token.lower().strip("*_\"'(") not in _REAL_WORDS:
                return token
    return None
