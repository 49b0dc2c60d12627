"""Phrase cues of the offline judge: dialogue acts, the speaker's voice, framed tasks.

Each pattern names one way a user turn relates to the answer before it (a revision
request, a challenge, a pointer back) or one way a model's turn is not a user's (a quiz
frame, a generic how-to question). They are features, weighed by the fitted model, not
verdicts, so a pattern may be broad where a miss costs more than a false hit. The
challenge cue alone is also reported as ``challenges_answer``; it is validated on
``tests/judges/fixtures/challenge_cases.jsonl``.
"""

from __future__ import annotations

import re


def _any(*patterns: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE | re.MULTILINE)


CHALLENGE = _any(
    r"\bare you (?:sure|certain|positive)\b",
    r"\b(?:that|this|it|which|the (?:answer|result|total))(?:'s|’s| is| was)(?: not| n[o']t)?"
    r" (?:(?:just|simply|actually|completely) )?(?:wrong|incorrect|not (?:right|correct)"
    r"|outdated|a mistake|an error)\b",
    r"\b(?:that|this|it) (?:can(?:'|’)t|cannot|doesn(?:'|’)t|does not) (?:be|seem|look|sound)"
    r"(?: \w+)? (?:right|correct|it)\b",
    r"\bi (?:don(?:'|’)t|do not) think (?:that(?:'s|’s| is)|this is|it(?:'s|’s| is)|you(?:'re|"
    r"’re| are)) (?:right|correct)\b",
    r"\bi (?:got|get|keep getting|calculated|computed|count(?:ed)?|make it|ran it and got)\b"
    r"[^.?!\n]{0,20}"
    r"\d",
    r"\b(?:recheck|re-check|recalculate|recompute|redo the (?:math|calculation))\b",
    r"\b(?:check|double-check|double check|verify|look at)(?: (?:your|the|that|this|it))?"
    r"(?: (?:math|work|answer|numbers?|calculations?|result|steps?|reasoning))?"
    r" (?:again|once more)\b",
    r"\b(?:double-check|double check|re-?verify) (?:that|this|it)\b",
    r"\b(?:check|double-check|double check|verify) (?:your|the) (?:math|answer|numbers"
    r"|calculations?|result|reasoning|work)\b",
    r"\bshould(?:n't|n’t| not) (?:it|that|this|the \w+) be\b",
    r"\b(?:isn't|isn’t|wasn't|wasn’t|aren't|aren’t|doesn't|doesn’t) (?:it|that|this|the \w+)"
    r"(?: \w+){0,3}\b.{0,60}\?",
    r",\s*(?:is|isn't|isn’t|does|doesn't|doesn’t|was|wasn't|wasn’t) (?:it|that|this)\s*\?",
    r"\b(?:isn't|isn’t|wasn't|wasn’t|aren't|aren’t) \S+(?: \S+)? (?:supposed|meant) to\b",
    r"\byou (?:made a mistake|made an error|forgot|missed|miscalculated|misread|got (?:it|that|the"
    r"(?: \w+(?:'s|’s)?){1,2}) wrong|mixed up)\b",
    r"\b(?:i(?:'m|’m| am) (?:pretty |quite |fairly )?sure (?:that(?:'s|’s| is)|it(?:'s|’s| is)"
    r"|you(?:'re|’re| are)) (?:wrong|not|outdated|incorrect))",
    r"^[^\w\n]*(?:really|wait|hold on|hmm,? wait)\b[^\n]{0,80}\?",
    r"\bhow did you (?:get|arrive at|come up with)\b",
    r"\b(?:i thought|i read|i heard|my book says|my doctor said)\b[^\n]{0,80}(?:\?|\bnot\b"
    r"|\bwrong\b|\binstead\b)",
    r"\bwho(?:'s|’s| is) right\b|\bnot \$?\d[\d,.]*\b(?:[^\n]{0,20}\?)?",
)
"""Doubt, correction or recomputation of the answer ("are you sure", "I got 42")."""
_NOT_CHALLENGE = re.compile(
    r"^\W*(?:ok(?:ay)?,? )?let me (?:double-)?check\b|^\W*(?:to solve|first,)", re.IGNORECASE
)
"""The asker checking their own side ("let me check with my doctor"), or the answer's voice."""


HEAD_CHARS = 400
"""Cues of how a turn opens or what it asks are read from its first characters: a
challenge or a quiz frame is stated up front, and long turns would cost more to scan
than they add (the judge must keep up with a run)."""


def head(turn: str) -> str:
    return turn[:HEAD_CHARS]


def challenges(turn: str) -> bool:
    """Whether the turn disputes or questions the answer's correctness (cue-based)."""
    start = head(turn)
    return CHALLENGE.search(start) is not None and _NOT_CHALLENGE.search(start) is None


REVISION = _any(
    r"^[^\w\n]*(?:(?:please|now|ok(?:ay)?|great|thanks)\W+)*(?:can|could|would|will) you"
    r" (?:please )?(?:make|rewrite|change|shorten|expand|simplify|add|remove|convert"
    r"|translate|format|show|put|turn|redo|fix|adjust|rephrase|explain|give|list|include)\b",
    r"^[^\w\n]*(?:(?:please|now|ok(?:ay)?|great|thanks|and)\W+)*(?:make|rewrite|change|shorten"
    r"|expand|simplify|add|remove|convert|translate|format|show|put|turn|redo|fix|adjust"
    r"|rephrase|include|use|try)\b",
)
"""A request to change or re-present the answer ("make it shorter", "show that as a table")."""

CLARIFY = _any(
    r"^[^\w\n]*(?:why|how come|what if|what about|how about|what do you mean|what does|is that"
    r"|is it|does that|does it|do i need|should i|can i|so (?:i|it|the))\b",
    r"\b(?:you said|you mentioned|you wrote|you suggested|as you said)\b",
    r"\b(?:per|a|each) (?:day|week|month|hour|dose)\b.*\?",
)
"""A question that only makes sense against the answer ("Is that per day?", "What if...")."""

REPORT_BACK = _any(
    r"^[^\w\n]*(?:i (?:tried|changed|ran|did|used|followed|added|checked|went|took|will|'ll"
    r"|’ll))\b",
    r"^[^\w\n]*(?:yes|no|yeah|yep|nope|sure|ok(?:ay)?|thanks|thank you)\b[,.!]?\s+\S",
    r"^[^\w\n]*(?:it(?:'s|’s| is)|my|the one)\b",
)
"""The asker reporting back or answering a question the assistant asked."""

FRAMED_TASK = _any(
    r"\b(?:what is|what's) the answer to (?:this|the|the following) (?:question|problem)",
    r"^[^\w\n]*(?:answer|solve|complete) (?:this|the following)\b",
    r"^[^\w\n]*(?:question|problem|q)\s*(?:\d+\s*)?[:.]",
    r"\b(?:choose|select|pick) the (?:correct|best|right)\b",
    r"^[^\S\n]*\(?[a-d][).]\s+\S.*\n\s*\(?[b-e][).]\s+\S",
    r"\b(?:true or false|fill in the blank|multiple choice)\b",
    r"\bcorrect answer\s*:",
)
"""A quiz or exam frame: a self-contained task handed to someone, not asked of this answer."""

WORD_PROBLEM = _any(
    r"\bhow (?:many|much|long|far|old|fast|often)\b",
    r"\bwhat (?:is|was|will be) the (?:total|sum|difference|product|probability|value|area"
    r"|average|cost|price|number|percentage|ratio)\b",
    r"\b(?:calculate|compute|find|determine) (?:the|how|what)\b",
)
"""The question of an arithmetic word problem; with new numbers, a new problem."""

GENERIC = _any(
    r"^[^\w\n]*(?:what (?:is|are) (?:the|some)? ?(?:best|most|good|common|main|key|top|popular)"
    r"|what are (?:some|the (?:benefits|advantages|risks|types))"
    r"|how (?:can|do|should) (?:i|you|we|one) (?:improve|become|learn|start|write|make|get)"
    r"|what is (?:a|an) |tell me about|give me (?:some|a list))\b",
)
"""A stock advice or trivia opener; common in new tasks that only share the topic."""

ASSISTANT_OFFER = _any(
    r"\bis there anything else\b|\blet me know if\b|\bhow (?:can|may) i (?:help|assist)\b",
    r"\bwhat (?:can|would) you like\b|\bfeel free to\b|\bi hope (?:this|that) helps\b",
    r"\bwhat brings you\b|\bwould you like (?:me|to)\b",
)
"""The answering side's offers and check-ins ("Is there anything else you'd like...")."""

_INTENT = """how why what which when where who if should can could would example examples explain
    tips difference compare steps step table list shorter longer more other else alternative
    alternatives risk risks side safe cost best recommend mean means meaning work works
    simpler simply detail details again instead also too still"""
INTENT_WORDS = frozenset(_INTENT.split())
"""Words that say what is asked rather than what about: the content-word overlaps ignore
them, yet a re-ask keeps the request's and a follow-up brings new ones."""

SECOND_PERSON = re.compile(r"\b(?:you|your|you're|you’re|yours)\b", re.IGNORECASE)
FIRST_PERSON = re.compile(r"\b(?:i|i'm|i’m|i've|i’ve|i'd|i’d|my|me|mine|we|our)\b", re.IGNORECASE)
QUESTION_OPENER = re.compile(
    r"^\W*(?:what|how|why|when|where|which|who|whose|can|could|would|will|is|are|do|does|did"
    r"|should|shall|may|might|has|have)\b",
    re.IGNORECASE,
)
GREETING = re.compile(
    r"^\W*(?:hi|hello|hey|dear|greetings|good (?:morning|afternoon|evening))\b", re.IGNORECASE
)
MARKDOWN = re.compile(r"(?m)^[^\S\n]*(?:[-*•]\s+\S|\d+[.)]\s+\S|#{1,6}\s|```|\|.*\|)")
"""Lists, headings, code fences and tables: the answer's layout, rare in a user's turn."""
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
CAPITALISED = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-Z][a-z]+(?:[A-Z][a-z]+)*\b", re.MULTILINE)
SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\n+")
