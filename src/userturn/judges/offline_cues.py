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


_ACK = r"(?:please|now|ok(?:ay)?|great|thanks|nice|cool|perfect|good|and)"
REVISION = _any(
    rf"^[^\w\n]*(?:{_ACK}\W+)*(?:can|could|would|will) you"
    r" (?:please )?(?:make|rewrite|change|shorten|expand|simplify|add|remove|convert"
    r"|translate|format|show|put|turn|redo|fix|adjust|rephrase|explain|give|list|include"
    r"|write|do|try)\b",
    rf"^[^\w\n]*(?:{_ACK}\W+)*(?:make|rewrite|change|shorten"
    r"|expand|simplify|add|remove|convert|translate|format|show|put|turn|redo|fix|adjust"
    r"|rephrase|include|use|try|keep going|continue)\b",
    r"\b(?:a|another|the same) (?:version|variant)\b|\b(?:aimed at|written for|for) (?:kids"
    r"|children|a child|beginners|teenagers)\b",
)
"""A request to change, re-present or extend the answer ("make it shorter", "show that as a
table", "a version aimed at kids", "keep going")."""

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

# Discourse cues. A follow-up leans on what was just said (a pronoun, "and", "so"), or
# hands over what the assistant asked for; a same-topic new question stands alone; the
# answering side concludes, advises or continues its list; a model playing the user may
# narrate or grade the exchange instead of taking part in it.
ANAPHORA = re.compile(
    r"\b(?:it|this|that|these|those|them|they|its|there|same|such|the one|above|here"
    r"|esto|eso|isso|isto|ça|cela|это)\b",
    re.IGNORECASE,
)
"""Words that point back into the conversation (also in a few other languages)."""
CONNECTIVE = re.compile(
    r"^\W*(?:and|so|but|also|then|what about|how about|ok(?:ay)?|wait|hmm|y|e|et|pero|mas"
    r"|mais|и|а)\b",
    re.IGNORECASE,
)
"""An opening that continues the exchange rather than starting a new one."""
PERSONAL = re.compile(r"\b(?:i|i'm|im|ive|i've|i'd|my|me|mine|we|our)\b", re.IGNORECASE)
NARRATION = re.compile(
    r"\bthe (?:user|assistant|model|response|chatbot)\b"
    r"|\b(?:usuario|asistente|usuário|assistente)\b",
    re.IGNORECASE,
)
"""The exchange described from outside ("The user thanks the assistant...")."""
RATING = re.compile(
    r"\b\d{1,2}\s*/\s*10\b|\b(?:score|rating|grade|puntuaci[oó]n|evaluaci[oó]n|nota)\s*:",
    re.IGNORECASE,
)
"""A grade of the answer ("Score: 6/10"): a reviewer's voice, not the asker's."""
CONCLUSION = re.compile(
    r"\b(?:the answer is|therefore|thus|so the total|in total|in any case|in summary"
    r"|overall,)\b",
    re.IGNORECASE,
)
"""How an answer concludes; under the user header, a continuation of the solution."""
LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s")
ASKS_FOR_DETAILS = re.compile(
    r"please (?:provide|share|tell|give|describe|let me know)"
    r"|could you (?:remind|tell|share|provide|clarify|describe)"
    r"|can you (?:tell|share|provide|describe)|more (?:details|information|context)"
    r"|what (?:are|is) you(?:r)? (?:looking|interested)",
    re.IGNORECASE,
)
"""The answer asks the user for something: the next turn may just hand it over."""
ADVICE = re.compile(
    r"\b(?:it(?:'s|’s| is) (?:best|important|recommended|a good idea)"
    r"|you (?:should|can|could|may|might) (?:also )?(?:try|consider|use|see|talk|ask|start)"
    r"|i (?:hear|understand) you|consult|i recommend|i(?:'d|’d) recommend|i suggest)\b",
    re.IGNORECASE,
)
"""Advice given, as the answering side gives it."""
THANKS = re.compile(
    r"\b(?:thanks|thank you|thx|ty|appreciate|gracias|obrigad[oa]|merci|danke|спасибо)\b",
    re.IGNORECASE,
)
REQUEST = re.compile(
    r"\?|\b(?:can|could|would|will) you\b"
    r"|\b(?:please|now|make|write|add|show|give|explain|tell|continue|also)\b",
    re.IGNORECASE,
)
"""Any ask at all; thanks without one is a contentless reaction."""
DEFINITIONAL = re.compile(
    r"^\W*(?:what(?:'s|’s| is| are)(?: the)? differences? between"
    r"|what (?:is|are) (?:a|an|the)? ?\w+(?: \w+)?\?$|how (?:do|does) \w+ work\??$"
    r"|what(?:'s|’s| is| are) the (?:most )?(?:common|main|typical|recommended|best"
    r"|first-line|health)\b"
    r"|what (?:are|is) the (?:symptoms|signs|causes|side effects|benefits|risks|types|stages)"
    r" of\b)",
    re.IGNORECASE,
)
"""A textbook question ("What's the difference between X and Y?"): same topic, no tie."""
CODE = re.compile(
    r"```|^\s*(?:import|from|def|class|function|const|let|var|#include|public|SELECT"
    r"|PROGRAM)\b|[{};]\s*$",
    re.IGNORECASE | re.MULTILINE,
)
CONTINUE = re.compile(
    r"\b(?:continue|continúa|continua|keep going|go on|next (?:scene|part|chapter)"
    r"|write (?:that|the next|this) scene|let'?s write)\b",
    re.IGNORECASE,
)
"""A request to carry a story or a text on: it builds on the answer."""

# What a revision request works on. A request to change the answer names its object by
# pointing back ("make it firmer", "shorten this"), by a form or an audience ("as a small
# table", "a version aimed at kids", "more formal"), or by a part of it; a new task brings
# its own material instead: a quoted passage, text after a colon, code, several lines.
REVISION_TARGET = re.compile(
    r"\b(?:(?:a|another) (?:\w+ )?(?:version|variant)|as (?:a|an) (?:\w+ )?\w+"
    r"|in(?:to)? (?:a )?(?:table|list|bullet(?: point)?s?|paragraphs?|sections?|steps)"
    r"|shorter|longer|simpler|firmer|clearer|punchier|funnier|darker|friendlier"
    r"|more (?:formal|casual|concise|detailed|balanced|polite)"
    r"|for (?:kids|children|a child|beginners)|type hints|docstrings?|again|instead)\b",
    re.IGNORECASE,
)
PAYLOAD = re.compile(r"[\"'“‘][^\"'”’]{12,}[\"'”’]|:\s*\S.{20,}|```|\n")
RELATIVE_THAT = re.compile(r"\bthat\s+(?:is|are|was|were|\w+s)\b", re.IGNORECASE)
""""that" opening a relative clause ("an app that uses X"), which points at nothing."""
PRO_ONE = re.compile(r"\b(?:write|give me|make|do|show me|try) (?:an)?(?:other )?ones?\b", re.I)
""""Write one that ...": a pro-form standing for the answer's kind of thing."""
REFUSED = re.compile(
    r"\b(?:can(?:'|’)?t|cannot|won(?:'|’)t|unable to|not)\s+(?:\w+\s+)?(?:continue|go on)\b",
    re.IGNORECASE,
)
ACTS_WORDS = 20
"""A revision request that works on the answer is short: longer turns bring new content."""
EXPLAIN_AGAIN = re.compile(
    r"\b(?:more detail(?:s|ed)?|detailed answer|elaborate|eli5|like i'?m (?:5|five)"
    r"|(?:5|five)[- ]year[- ]old|simpler terms|(?:didn'?t|don'?t|do not|did not) understand"
    r"|i'?m (?:confused|lost)|explain (?:it |that |this )?(?:again|better|more))\b",
    re.IGNORECASE,
)
"""A request to explain the answer again, simpler or in more depth: whatever it names, it
is about what was just said ("detailed answer", "explain me like im five")."""
ABOUT_REQUEST = re.compile(r"\byour (?:request|question|message|query)\b", re.IGNORECASE)
""""I don't understand your request": the answering side's reply to a request it can't
read, not an asker's."""


def acts_on_answer(turn: str) -> bool:
    """A short request to revise, re-present, explain again or carry on the answer itself.

    The learner weighs a revision cue against the turn's lack of shared words, and a
    request such as "Can you show the calculation as a small table?" or "detailed answer"
    shares none, so it reads as a new task. A request to carry on counts when its first
    line says so and does not refuse ("I can't continue ...").
    """
    text = turn.strip()
    opening = text.split("\n", 1)[0][:40]
    if CONTINUE.search(opening) is not None and REFUSED.search(opening) is None:
        return True
    if len(text.split()) > ACTS_WORDS or PAYLOAD.search(text) is not None:
        return False
    if EXPLAIN_AGAIN.search(text) is not None and ABOUT_REQUEST.search(text) is None:
        return True
    if REVISION.search(head(text)) is None:
        return False
    pointer = ANAPHORA.search(RELATIVE_THAT.sub(" ", text)) or PRO_ONE.search(text)
    return REVISION_TARGET.search(text) is not None or pointer is not None


CLOSER = re.compile(
    r"does (?:that|this) make sense|any (?:other |more |further )?questions|anything else"
    r"|how (?:else )?can i (?:help|assist)|hope (?:this|that) helps|let me know if"
    r"|is there (?:something|anything)|feel free|have a great|good luck",
    re.IGNORECASE,
)
"""A closing formula: it asks the user nothing in particular."""
HANDOVER_WORDS = 3
ANSWER_TAIL = 300
"""Characters at the end of the answer that say what it asks of the user next."""
MOVE_WORDS = 4
"""A move in a game or a story is a few words ("X", "fine. hxg4", "look for a weapon")."""
INVITES_MOVE = re.compile(
    r"\byour (?:turn|move|next move)\b|\bX or O\b|\bwhat (?:do|will|would) you (?:like to )?do\b"
    r"|\bwhat(?:'s| is) your (?:move|response|choice|guess)\b",
    re.IGNORECASE,
)
"""The answer hands the next move to the user: a game, a guessing round, a story to steer."""
SETS_TASK = re.compile(
    r"\bi want you to\b|\bi(?:'ll| will) (?:give|provide|send|paste|share)\b"
    r"|\bin the next messages?\b",
    re.IGNORECASE,
)
"""A person setting up a task for what comes next, not answering what was asked."""


def asks_for_input(answer: str) -> bool:
    """The answer's last two sentences ask the user for something in particular."""
    tail = answer.rstrip()[-ANSWER_TAIL:]
    last = " ".join(SENTENCE_END.split(tail)[-2:])
    if CLOSER.search(last) is not None:
        return False
    return ASKS_FOR_DETAILS.search(last) is not None or tail.endswith("?")


def invites_move(answer: str) -> bool:
    """The answer's last lines hand the next move to the user ("Now it's your turn
    again.", "Do you want to play as X or O?", "What do you do?")."""
    return INVITES_MOVE.search(answer.rstrip()[-ANSWER_TAIL:]) is not None


def makes_move(turn: str, invited: bool) -> bool:
    """After an answer that hands the user the next move (``invited``: ``invites_move`` of
    the answer, computed once per context), a few words without a question are that move
    ("2. Bf1-c4", "X", "look for a weapon"). They share nothing with the answer, and the
    model and the surface gate read them as degenerate; answering what the assistant asked
    is genuine by the rubric."""
    return invited and 0 < len(turn.split()) <= MOVE_WORDS and "?" not in turn


def hands_over(turn: str, asked: bool) -> bool:
    """A statement in the first person after an answer that asked for something in
    particular (``asked``: ``asks_for_input`` of the answer, computed once per context): the
    asker handing over what was asked ("I hold a Bachelor of Science ...", "we only have
    a ct scanner"), neither setting up a task ("I want you to ...") nor advising in the
    answering side's voice ("I hear you ... a pharmacist can"). People's replies of this
    kind share few words with the answer, and the model called some of them new tasks."""
    text = turn.strip()
    return (
        asked
        and "?" not in text
        and len(text.split()) >= HANDOVER_WORDS
        and PERSONAL.search(text) is not None
        and SETS_TASK.search(text) is None
        and ADVICE.search(text) is None
    )
