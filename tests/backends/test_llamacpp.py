"""llama.cpp backend: token-level BOS with real vocab GGUFs, and the real SmolLM2.

Run: ``.venv/bin/python -m pytest tests/backends/test_llamacpp.py -q``
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from userturn.backends import load_backend
from userturn.backends.base import TemplateOptions
from userturn.backends.llamacpp import LlamaCppBackend
from userturn.chat import derive_markers, user_turn_prompt
from userturn.errors import UserError
from userturn.spec import Spec
from userturn.types import GenRequest, SamplingParams

DATE = TemplateOptions(date=dt.date(2026, 11, 29))
CTX = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4."},
]


def vocab_backend(shared: Path, vocab: str) -> LlamaCppBackend:
    return LlamaCppBackend(Spec("llamacpp", str(shared / "vocab" / vocab)))


def test_llama3_single_bos_at_token_level(shared_dir: Path) -> None:
    be = vocab_backend(shared_dir, "ggml-vocab-llama-bpe.gguf")
    assert be.runtime_adds_bos  # llama.cpp prepends BOS for the Llama-3 vocab
    tpl = be.template(
        TemplateOptions(
            date=DATE.date,
            path=str(shared_dir / "chat_templates" / "meta-llama-Llama-3.1-8B-Instruct.jinja"),
        )
    )
    up = user_turn_prompt(tpl, CTX)
    ids = be.tokenize(up.prompt)
    bos = be._vocab.token_bos()
    assert ids[0] == bos and ids.count(bos) == 1
    header = be.tokenize(derive_markers(tpl).user_header)[1:]  # drop runtime BOS
    assert ids[-len(header) :] == header


def test_qwen35_no_bos_and_special_tokens_are_single_ids(shared_dir: Path) -> None:
    be = vocab_backend(shared_dir, "ggml-vocab-qwen35.gguf")
    assert not be.runtime_adds_bos
    tpl = be.template(
        TemplateOptions(
            date=DATE.date, path=str(shared_dir / "chat_templates" / "Qwen3.5-4B.jinja")
        )
    )
    ids = be.tokenize(user_turn_prompt(tpl, CTX).prompt)
    im_start = be.tokenize("<|im_start|>")
    assert len(im_start) == 1 and ids[0] == im_start[0]
    assert ids.count(im_start[0]) == 4  # system, user, assistant, and the new user header
    assert be._vocab.token_bos() not in ids


def test_tokenizer_matches_reference_vectors(shared_dir: Path) -> None:
    be = vocab_backend(shared_dir, "ggml-vocab-qwen35.gguf")
    base = shared_dir / "vocab" / "ggml-vocab-qwen35.gguf"
    texts = (
        base.with_suffix(".gguf.inp").read_text(encoding="utf-8").split("\n__ggml_vocab_test__\n")
    )
    outs = base.with_suffix(".gguf.out").read_text(encoding="utf-8").splitlines()
    for text, out in list(zip(texts, outs, strict=False))[:20]:
        assert be.tokenize(text) == [int(x) for x in out.split()], repr(text)


@pytest.fixture(scope="module")
def smol() -> LlamaCppBackend:
    be = load_backend("smollm2-135m")
    assert isinstance(be, LlamaCppBackend)
    return be


def test_smollm2_template_keeps_its_first_header(smol: LlamaCppBackend) -> None:
    tpl = smol.template(DATE)
    assert tpl.bos_token == "<|im_start|>" and not smol.runtime_adds_bos
    up = user_turn_prompt(tpl, CTX[1:])
    assert up.prompt.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert up.prompt.endswith("<|im_start|>user\n")
    assert derive_markers(tpl).preamble.startswith("<|im_start|>system\nYou are a helpful")


def _req(
    smol: LlamaCppBackend, temp: float, seeds: tuple[int, ...], max_tokens: int = 24
) -> GenRequest:
    tpl = smol.template(DATE)
    up = user_turn_prompt(tpl, CTX[1:])
    return GenRequest(
        prompt=up.prompt,
        role="user",
        seeds=seeds,
        params=SamplingParams(temperature=temp, max_tokens=max_tokens, stop=up.stop),
    )


def test_seeds_and_greedy_are_reproducible(smol: LlamaCppBackend) -> None:
    a, b = smol.generate([_req(smol, 1.0, (1, 2)), _req(smol, 1.0, (1,))])
    assert a.completions[0].text == b.completions[0].text
    assert a.completions[0].text != a.completions[1].text
    g1, g2 = smol.generate([_req(smol, 0.0, (5,)), _req(smol, 0.0, (9,))])
    assert g1.completions[0].text == g2.completions[0].text
    assert all("<|im_end|>" not in c.text for r in (a, b, g1) for c in r.completions)


def test_prefix_reuse_and_length_finish(smol: LlamaCppBackend) -> None:
    first, second = smol.generate([_req(smol, 0.0, (0,), 2), _req(smol, 0.0, (0,), 2)])
    assert first.completions[0].finish == "length"
    assert second.prompt_tokens_reused == second.prompt_tokens - 1


def test_context_overflow_is_a_user_error(smol: LlamaCppBackend) -> None:
    with pytest.raises(UserError, match="n_ctx"):
        smol.generate([_req(smol, 0.0, (0,), 10_000)])
