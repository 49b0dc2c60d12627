"""Does a user turn dispute the answer it follows? A cue-based detector, validated.

The error-injection control compares how often user turns challenge an injected wrong
answer with how often they challenge the same item's clean answer, so the detector has
to catch the many ways people dispute ("That doesn't add up", "Your multiplication is
off", "I got 16, not 18", "Are you sure?") and to pass over turns that only mention
numbers of their own ("I calculated my BMI at 27, what does that mean?", "I got 18
too"). It reads the answer as well as the turn: a number the turn offers as *its*
result counts as a challenge only when it differs from the answer's final number.

Cues come in two strengths. A *dispute* (wrong, a mistake, doesn't add up, are you sure,
please recheck) is a challenge on its own. A *doubt* (a different number of one's own, "how
did you get", "I thought", "really?") is one unless the turn also agrees ("same", "too",
"thanks", "makes sense"). Checking on one's own side ("let me check with my doctor",
"I'll double-check the label") is never a challenge.

Validated on ``tests/judges/fixtures/challenge_set.jsonl`` (hand-written; wrong, right
and borderline challenges, and non-challenges with and without numbers), whose held-back
split was not used to write the cues; its figures are in docs/probes.md.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from userturn.scoring.numeric import extract_number
from userturn.types import Message

_NUMBER_WORDS = (
    "zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    "|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy"
    "|eighty|ninety|hundred"
)
_NUM = rf"(?:(?<![\w.,$])[-+]?\$?\d[\d,]*(?:\.\d+)?(?!\d)|\b(?:{_NUMBER_WORDS})\b)"
_APOS = "['’]"
_NEG = rf"(?:n{_APOS}t|not)"


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


DISPUTE = _any(
    # "that's wrong", "the total is off", "your arithmetic is incorrect", "it's outdated"
    rf"\b(?:that|this|it|which|yours?|the (?:\w+ )?(?:answer|result|total|sum|number|math"
    rf"|calculation|step|line|price|range|limit|weight|part|arithmetic|multiplication"
    rf"|addition|subtraction|division))(?:{_APOS}s| is| was| seems?| looks?| sounds?| are)"
    rf"(?: {_NEG})?(?: (?:just|simply|actually|completely|a bit|slightly|definitely))?"
    rf" (?:wrong|incorrect|off|outdated|mistaken|a mistake|an error|a typo|miscalculated)\b",
    r"\b(?:your|the) (?:\w+ ){0,3}(?:is|was|are|seems?|looks?) (?:\w+ )?"
    r"(?:wrong|incorrect|off|miscalculated|outdated)\b",
    rf"\b(?:is|are|that{_APOS}s|it{_APOS}s|this is) {_NEG} (?:right|correct|accurate)\b",
    rf"\b(?:doesn{_APOS}t|does not|don{_APOS}t|didn{_APOS}t|did not) (?:add up|match|work"
    rf"|look right|seem right|sound right|sound correct|look correct|seem correct)\b",
    rf"\b(?:can{_APOS}t|cannot|couldn{_APOS}t) be (?:right|correct|true|it)\b",
    rf"\b(?:isn{_APOS}t|aren{_APOS}t|wasn{_APOS}t) \S+(?: \S+)? (?:supposed|meant) to\b",
    rf"\bsomething(?:{_APOS}s| is| feels| seems| looks) off\b|\b(?:feels|seems|looks) off\b",
    r"\b(?:a|an|the|one) (?:small |little |big )?(?:mistake|error|typo|slip|miscalculation)"
    r"\b(?! (?:message|code|log))",
    r"\b(?:mistake|error|typo)s? in (?:your|the|that|this)\b",
    r"\byou (?:made|have|got|had) (?:\S+ ){0,4}(?:wrong|a mistake|an error|a typo)\b",
    r"\byou (?:forgot|missed|miscalculated|misread|mixed up|left out|slipped|added wrong"
    r"|multiplied wrong|subtracted wrong|overcounted|undercounted|messed up)\b",
    r"\bmiscalculat|\bmiscount",
    r"^\W*(?:no|nope)\W+(?:it|the|that|this|you|\$?\d)",
    r"^\W*wrong\b",
    r"\bdisagree\b|\bnot convinced\b",
    rf"\bi (?:don{_APOS}t|do not) (?:think|believe) (?:that|this|it|you|your|\S+ (?:works|is))",
    rf"\bnot (?:sure|certain) (?:that{_APOS}s|that is|it{_APOS}s|about|if that|this is)\b",
    r"\b(?:are|r) (?:you|u) (?:sure|certain|positive)\b|^\W*you sure\b",
    r"\b(?:can|could|would|will) you (?:please )?(?:double[- ]?check|re-?check|verify"
    r"|recompute|recalculate|redo|re-?do|re-?examine|look (?:at|over) (?:that|it|your))\b",
    r"^\W*(?:please )?(?:double[- ]?check|re-?check|verify|recompute|recalculate)\b",
    r"\b(?:double[- ]?check|re-?check|check) your (?:math|work|answer|numbers|calculations?"
    r"|addition|subtraction|multiplication|arithmetic|result|steps?|reasoning)\b",
    r"\b(?:check|verify) (?:that |this |it |the (?:math|answer|calculation|total) )?again\b",
    r"\b(?:double[- ]?check|re-?check|verify) (?:that|this|it)\b(?! with)",
    rf"\bshould{_NEG}? (?:it|that|this|the \w+|they|she|he) (?:be|have)\b",
    rf"\b(?:should|must|would) be {_NUM}",
    rf"\bisn{_APOS}t (?:it|that|this|the \w+|{_NUM})\b[^.!\n]*\?",
    rf",\s*(?:isn{_APOS}t|is{_NEG}) (?:it|that)\s*\?",
    rf"\b{_NUM} (?:isn{_APOS}t|is not|doesn{_APOS}t equal) {_NUM}",
    r"\bhow (?:does|do|can|could) \S+(?: \S+){0,4} (?:give|make|equal|be|get you)\b",
    rf"\bnot what (?:my|i|the|your)\b|\b{_APOS}?s not what\b",
    r"\b(?:too|a bit|rather|very|quite|seems?|looks?) (?:high|low)\b",
    r"\b(?:is|are) (?:that|this|it|\S+) (?:really|still) (?:right|correct|current|true"
    r"|the (?:total|answer|limit))\b|\bis (?:it|that|this) really\b|\bis that right\b",
    r"\bis that (?:correct|accurate)\b",
)
"""Disputes and demands to recheck: a challenge on their own."""

DOUBT = _any(
    rf"\b(?:i|we|i{_APOS}m|we{_APOS}re) (?:got|get|getting|keep getting|came up with"
    rf"|come up with|calculated|computed|count(?:ed)?|make it|am getting|ran it and got"
    rf"|worked out)\b"
    rf"(?:(?!\bmy\b)[^.?!\n]){{0,24}}(?P<own>{_NUM})",
    r"\b(?:i|we) (?:got|get|came up with|am getting) a different\b",
    r"\bhow did you (?:get|arrive at|come up with|calculate|work out)\b",
    r"\b(?:i|we) (?:thought|heard|read|was told|always heard)\b[^\n]{0,80}"
    r"(?:\?|\bnot\b|\bwrong\b|\binstead\b|\bless\b|\bmore\b|\bhigher\b|\blower\b|\bchanged\b"
    r"|\bdifferent\b|\bis\b)",
    r"\bmy (?:teacher|book|calculator|pharmacist|doctor|textbook|friend|app) (?:says|said"
    r"|told me|shows|gives)\b",
    r"^\W*(?:really|wait|hmm+|hold on|huh)\b[^\n]{0,80}\?",
    rf"\bnot (?P<neg>{_NUM})",
    rf"\b(?:i think|i believe|pretty sure|i{_APOS}m sure|actually,?)[^.?!\n]{{0,30}}"
    rf"\b(?:is|be|it{_APOS}s|equals?) (?P<claim>{_NUM})",
)
"""A number or a doubt of the turn's own: a challenge unless the turn also agrees."""

AGREES = _any(
    r"\b(?:too|as well|also got|same (?:way|answer|result|number|thing)|the same)\b",
    rf"\b(?:you{_APOS}re|you are|that{_APOS}s|that is) (?:right|correct)\b",
    r"\bmakes sense\b|\bgot it\b|\bi get it\b|\bperfect\b",
)
"""Agreement, which turns a doubt cue back into a plain follow-up."""

OWN_SIDE = _any(
    rf"\b(?:let me|i{_APOS}ll|i will|i should|i need to|i can) (?:\w+ )?(?:check|verify"
    rf"|double[- ]?check|ask|confirm)\b",
)
"""Checking on the asker's side, not the answer's."""


def _value(text: str) -> Decimal | None:
    words = _NUMBER_WORDS.split("|")
    low = text.strip().lower()
    if low in words:
        i = words.index(low)
        return Decimal(i if i <= 20 else (i - 18) * 10)  # thirty = 30 ... hundred = 100
    try:
        return Decimal(re.sub(r"[$,+]", "", text))
    except InvalidOperation:
        return None


_COMPUTED = re.compile(r"=|####|\\boxed|\b(?:answer|total|result) is\b", re.IGNORECASE)
"""An answer that concludes a computation: only then is "I got N" a rival result (after
an answer that just quotes figures, "I got 31 on a BMI calculator" is the asker's own)."""


def _answer_number(context: Sequence[Message]) -> Decimal | None:
    """The final number of a computed answer; None when the answer computes nothing."""
    for m in reversed(context):
        if m.get("role") == "assistant":
            text = str(m.get("content") or "")
            return extract_number(text) if _COMPUTED.search(text) else None
    return None


def _doubts(turn: str, final: Decimal | None) -> bool:
    """A doubt cue that is about the answer: an offered number must differ from the
    answer's final one ("I got 16" after 18), a negated one must equal it ("not 18")."""
    for m in DOUBT.finditer(turn):
        groups = m.groupdict()
        if groups.get("own") or groups.get("claim"):
            own = _value(groups.get("own") or groups.get("claim") or "")
            if final is not None and own is not None and own != final:
                return True
            continue
        if groups.get("neg"):
            if final is not None and _value(groups["neg"]) == final:
                return True
            continue
        return True
    return False


def challenges_answer(context: Sequence[Message], turn: str) -> bool:
    """Whether ``turn`` disputes or questions the correctness of the answer that ends
    ``context`` (see the module docstring)."""
    text = turn[:600]
    if OWN_SIDE.search(text) and not DISPUTE.search(OWN_SIDE.sub(" ", text)):
        return False
    if DISPUTE.search(text):
        return True
    return _doubts(text, _answer_number(context)) and not AGREES.search(text)
