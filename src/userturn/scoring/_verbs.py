"""An approximate "does the text start with a verb" test, for when NLTK's POS tagger data
(``averaged_perceptron_tagger_eng``) can't be downloaded.

IFBench's ``words:start_verb`` asks whether the tagger gives the first token a ``VB*`` tag.
Without the tagger we check the first token against common English verbs, in base form
(imperatives: "Write", "Imagine", "Let") and regular inflections ("Writing", "Started"),
plus irregular forms of the commonest verbs ("Is", "Was", "Went"). It is a lexicon, not a
tagger: rare verbs are missed and noun/verb homographs ("Plan", "Picture") count as verbs.
Scores that used it are marked approximate.
"""

from __future__ import annotations

_BASE = """
accept add adjust agree allow analyze answer apply arrange ask assume avoid bake be become
begin believe boil bring build buy calculate call carry catch celebrate change check choose
clean click climb close collect combine come compare complete compose compute confirm
connect consider contact continue convert cook count craft create cut dance decide define
delete delve demonstrate describe design determine develop discover discuss display dive
divide do download draw dream drink drive drop eat edit embark embrace emphasize encourage
end enjoy ensure enter envision escape estimate evaluate examine expand explain explore feel
fill find finish fix fly focus follow forget gather get give go grab grow guess guide hand
have hear help highlight hold hope identify imagine implement improve include insert inspire
install introduce invest join jump keep kick know launch lead learn leave let lift like list
listen live look love make manage measure meet mention mix move multiply navigate need note
notice observe offer open order organize outline paint pause pay pick picture place plan
play pour practice predict prepare present press prioritize proceed protect prove provide
pull push put read recall reconsider reflect refuse relax remember remove repair repeat
replace reply respond rest return reveal review revise rewrite ride rise run save say see
seek select sell send serve set share show sing sit sketch sleep solve sort speak spend start
state stay step stir stop study subtract suggest summarize support suppose swim take talk
teach tell test thank think throw train translate travel try turn type uncover understand
unlock update upgrade use validate verify visit wait walk want wash watch welcome win wish
wonder work write
"""
BASE = frozenset(_BASE.split())

_IRREGULAR = """
am is are was were been being has had having does did done doing went gone made took taken
gave given got gotten said told thought found knew known saw seen came began begun wrote
written brought built bought caught chose chosen drew drawn drank driven drove ate eaten felt
flew flown forgot forgotten grew grown heard held kept led left lit lost meant met paid put
ran read rode rose sang sat slept sold sent set showed shown sang spoke spoken spent stood
swam taught threw thrown understood woke won wore
"""
IRREGULAR = frozenset(_IRREGULAR.split())


def _is_verb_form(word: str) -> bool:
    if word in BASE or word in IRREGULAR:
        return True
    for suffix, repl in (
        ("ing", ""),
        ("ing", "e"),
        ("ed", ""),
        ("ed", "e"),
        ("ied", "y"),
        ("ies", "y"),
        ("es", ""),
        ("s", ""),
    ):
        if word.endswith(suffix) and len(word) > len(suffix) + 1:
            stem = word[: -len(suffix)]
            if stem + repl in BASE or (stem[-1:] == stem[-2:-1] and stem[:-1] in BASE):
                return True
    return False


def starts_with_verb(tokens: list[str]) -> bool:
    """Whether the first token looks like a verb (see the module docstring)."""
    return bool(tokens) and _is_verb_form(tokens[0].lower())
