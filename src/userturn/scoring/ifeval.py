"""Instruction-following scoring for IFEval and IFBench, through ``if-verifiable``.

Four figures per response, as in the IFEval paper: prompt-level (every instruction
followed) and instruction-level (the fraction followed), each strict (the response as
is) and loose (also trying it without its first/last line or markdown asterisks).
``correct`` is prompt-level strict, the headline number; the other three ride along in
the stored score. Checkers that need NLTK data use the substitutes in ``nltk_data`` when
NLTK's own data is missing; an instruction scored with an approximate substitute is
listed under ``approximate``. A verifier that fails or an instruction id the installed
``if-verifiable`` doesn't know leaves the item unscored (``correct: None``, with the
reason), never silently passed or failed.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from userturn.errors import missing_extra
from userturn.scoring.nltk_data import prepare

log = logging.getLogger(__name__)
Benchmark = Literal["ifeval", "ifbench"]


def _registry(benchmark: Benchmark) -> dict[str, Any]:
    try:
        prepare()
        if benchmark == "ifeval":
            from if_verifiable.ifeval.instructions_registry import INSTRUCTION_DICT
        else:
            from if_verifiable.ifbench.instructions_registry import INSTRUCTION_DICT
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.startswith("if_verifiable"):
            raise missing_extra("ifeval", "if-verifiable") from exc
        raise
    return dict(INSTRUCTION_DICT)


def score_instructions(
    benchmark: Benchmark,
    prompt: str,
    instruction_ids: list[str],
    kwargs: list[dict[str, Any]],
    response: str,
) -> dict[str, Any]:
    """Score ``response`` against the item's instructions (see the module docstring)."""
    registry = _registry(benchmark)
    from if_verifiable.common import evaluate_instructions

    unknown = [i for i in instruction_ids if i not in registry]
    if unknown:  # if-verifiable would skip them and score the rest: an inflated pass
        return _unscored(f"instruction(s) unknown to if-verifiable: {', '.join(unknown)}")
    try:
        results, scores = evaluate_instructions(
            response=response,
            instruction_id_list=instruction_ids,
            kwargs_list=kwargs,
            prompt=prompt,
            instruction_registry=registry,
        )
    except Exception as exc:  # a verifier bug must not end a long run
        log.warning(
            "%s verifier failed on %s: %s: %s", benchmark, instruction_ids, type(exc).__name__, exc
        )
        return _unscored(f"verifier error: {type(exc).__name__}: {exc}")
    setup = prepare()
    return {
        "correct": scores.binary_strict == 1.0,
        "prompt_strict": scores.binary_strict == 1.0,
        "prompt_loose": scores.binary_loose == 1.0,
        "instruction_strict": scores.partial_strict,
        "instruction_loose": scores.partial_loose,
        "instructions": [
            {"id": r.instruction_id, "strict": r.strict_pass, "loose": r.loose_pass}
            for r in results
        ],
        "approximate": [i for i in instruction_ids if setup.approximate(i)],
        "nltk_data": {"punkt": setup.punkt, "stopwords": setup.stopwords, "tagger": setup.tagger},
    }


def _unscored(reason: str) -> dict[str, Any]:
    return {
        "correct": None,
        "prompt_strict": None,
        "prompt_loose": None,
        "instruction_strict": None,
        "instruction_loose": None,
        "error": reason,
    }
