"""The real vLLM engine on a GPU: tokens, seeds, prefix caching, scoring that does not
depend on request order, an end-to-end run.

Run on a GPU machine with vLLM installed: ``tests/gpu/run_vllm_check.sh`` (or
``python -m pytest -m gpu tests/gpu -q``). Skipped elsewhere (``make test`` deselects the
``gpu`` marker). The model is ``$USERTURN_GPU_MODEL`` (an HF id or folder), by default the
embedded SmolLM2 (its GGUF dequantized to an HF folder once, in the userturn cache).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.gpu
vllm = pytest.importorskip("vllm")
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

from userturn.backends import load_backend  # noqa: E402
from userturn.backends.base import TemplateOptions  # noqa: E402
from userturn.chat import answer_prompt, derive_markers, user_turn_prompt  # noqa: E402
from userturn.config import build_config  # noqa: E402
from userturn.run.driver import run  # noqa: E402
from userturn.types import GenRequest, SamplingParams, ScoreRequest  # noqa: E402

MODEL = os.environ.get("USERTURN_GPU_MODEL", "smollm2-135m")
SPEC = f"vllm:{MODEL}?gpu_memory_utilization=0.3&max_model_len=4096"
QUESTION = [
    {
        "role": "user",
        "content": "Natalia sold clips to 48 of her friends in April, "
        "and then she sold half as many clips in May. How many clips did Natalia sell "
        "altogether in April and May? Explain step by step.",
    }
]


@pytest.fixture(scope="module")
def backend() -> Iterator[Any]:
    b = load_backend(SPEC)
    yield b
    b.close()


def _prompts(b: Any) -> tuple[str, Any, Any]:
    tpl = b.template(TemplateOptions(date=dt.date(2025, 1, 1)))
    return answer_prompt(tpl, QUESTION), tpl, derive_markers(tpl)


def test_engine_sees_our_token_ids(backend: Any) -> None:
    ap, _, _ = _prompts(backend)
    engine_tok = backend.llm.get_tokenizer()
    assert engine_tok(ap, add_special_tokens=False)["input_ids"] == backend.tokenize(ap)
    out = backend.llm.generate(
        [{"prompt_token_ids": backend.tokenize(ap)}],
        vllm.SamplingParams(max_tokens=1),
        use_tqdm=False,
    )
    assert list(out[0].prompt_token_ids) == backend.tokenize(ap)


def test_greedy_seeds_and_prefix_cache(backend: Any) -> None:
    ap, tpl, markers = _prompts(backend)
    greedy = SamplingParams(max_tokens=64, stop=markers.answer_stops(tpl))
    (a1,) = backend.generate([GenRequest(ap, "assistant", greedy)])
    (a2,) = backend.generate([GenRequest(ap, "assistant", greedy)])
    assert a1.completions == a2.completions
    ctx = [*QUESTION, {"role": "assistant", "content": a1.completions[0].text}]
    up = user_turn_prompt(tpl, ctx, markers)
    hot = SamplingParams(temperature=1.0, max_tokens=32, stop=up.stop)
    r = backend.generate(
        [
            GenRequest(up.prompt, "user", hot, seeds=(1, 2, 3)),
            GenRequest(up.prompt, "user", hot, seeds=(2,)),
        ]
    )
    assert r[0].completions[1] == r[1].completions[0]  # a seed is a sample, batch or not
    assert r[0].prompt_tokens_reused > 0, "prefix caching reused nothing"
    for comp in r[0].completions:
        assert not comp.text.endswith(tpl.eos_token)


def test_scores_do_not_depend_on_request_order(backend: Any) -> None:
    """vLLM's prompt logprobs have been reported to change with request order when
    prefix caching is on; scoring runs on an engine with caching off, so the same pairs
    sent in two orders score the same, token for token. The bound is float32 rounding
    of a sum over the continuation, far below a measure's resolution (0.01 nats)."""
    ap, tpl, markers = _prompts(backend)
    ctx = [*QUESTION, {"role": "assistant", "content": "She sold 48 + 24 = 72 clips."}]
    up = user_turn_prompt(tpl, ctx, markers)
    reqs = [
        ScoreRequest(up.prompt, ("Why half?", "Thanks!")),
        ScoreRequest(ap, ("She sold 72 clips.",)),
        ScoreRequest(up.prompt, ("What if she sold a third as many in May?",)),
    ]
    first = backend.loglikelihood(reqs)
    again = backend.loglikelihood(list(reversed(reqs)))[::-1]
    for a, b in zip(first, again, strict=True):
        assert [s.n_tokens for s in a.scores] == [s.n_tokens for s in b.scores]
        for x, y in zip(a.scores, b.scores, strict=True):
            assert abs(x.logprob - y.logprob) <= 1e-4 * max(1, x.n_tokens)


def test_end_to_end_run(tmp_path: Path) -> None:
    cfg = build_config(
        {
            "models": [SPEC],
            "datasets": ["gsm8k"],
            "limit": 3,
            "temperatures": [0.0, 1.0],
            "samples": 2,
            "judges": ["rules"],
            "max_answer_tokens": 256,
            "max_user_tokens": 64,
        }
    )
    result = run(cfg, tmp_path / "run")
    rows = [json.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_text().splitlines()]
    assert len(rows) == 3 * (1 + 2)
    assert all(r["judgments"][0]["status"] == "ok" for r in rows)
    assert result.stats.prompt_tokens_reused > 0
    again = run(cfg, tmp_path / "run")
    assert again.stats.model_calls == 0
    out = os.environ.get("OUT")
    if out:  # the prepared script brings these back for the report
        (Path(out) / "vllm_records.jsonl").write_text(
            (tmp_path / "run" / "records.jsonl").read_text()
        )
        (Path(out) / "vllm_run_stats.json").write_text(json.dumps(result.stats.to_json()))
