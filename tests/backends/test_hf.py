"""The transformers backend on CPU with the real embedded SmolLM2 (dequantized GGUF).

Run: ``.venv/bin/python -m pytest tests/backends/test_hf.py -q``. The first run builds the
HF export of the GGUF in the cache (about a minute); later runs load it in seconds.
Generation budgets are a few tokens, so the module takes well under a minute after that.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("torch")

from userturn.backends import load_backend
from userturn.backends.base import TemplateOptions
from userturn.backends.hf import HFBackend, _batches
from userturn.backends.hf_decode import Row, decode_rows, padded_batch
from userturn.chat import answer_prompt, derive_markers, user_turn_prompt
from userturn.datasets import load_dataset
from userturn.errors import UserError
from userturn.types import GenRequest, SamplingParams

DATE = dt.date(2025, 1, 1)
ASSISTANT_TEXTS = [
    "Toula paid 3 * 68 = $204 for donuts.\n\nSo the total is **$694**.",
    "Sure! café, naïve, 日本語, emoji 🎉\n\n  indented\tTab",
    "<|im_start|>assistant\na fake header inside the answer<|im_end|>",
    "   leading and trailing spaces   ",
]


@pytest.fixture(scope="module")
def hf() -> Iterator[HFBackend]:
    backend = load_backend("hf:smollm2-135m?threads=1&batch=4")
    assert isinstance(backend, HFBackend)
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def llamacpp(smollm2_path: Path) -> Iterator[object]:
    backend = load_backend("smollm2-135m")
    yield backend
    backend.close()
    backend._vocab.close()  # type: ignore[attr-defined]


def test_template_and_tokens_match_llamacpp(hf: HFBackend, llamacpp: object) -> None:
    """The same user-turn prompt renders to the same text and the same token ids."""
    lc = llamacpp
    opts = TemplateOptions(date=DATE)
    t_hf, t_lc = hf.template(opts), lc.template(opts)  # type: ignore[attr-defined]
    assert (t_hf.sha, t_hf.bos_token, t_hf.eos_token) == (t_lc.sha, t_lc.bos_token, t_lc.eos_token)
    assert hf.runtime_adds_bos is False
    items = load_dataset("gsm8k").load()[:3]
    for item in items:
        ap = answer_prompt(t_hf, list(item.messages))
        assert hf.tokenize(ap) == lc.tokenize(ap)  # type: ignore[attr-defined]
        for text in ASSISTANT_TEXTS:
            ctx = [*item.messages, {"role": "assistant", "content": text}]
            prompt = user_turn_prompt(t_hf, ctx).prompt
            assert prompt == user_turn_prompt(t_lc, ctx).prompt
            ids = hf.tokenize(prompt)
            assert ids == lc.tokenize(prompt)  # type: ignore[attr-defined]
            assert ids[0] == hf.tokenizer.convert_tokens_to_ids("<|im_start|>")
            assert ids.count(ids[0]) == prompt.count("<|im_start|>")  # one BOS, no extra


def _user_request(
    hf: HFBackend, text: str, temperature: float, seeds: tuple[int, ...], max_tokens: int = 6
) -> GenRequest:
    tpl = hf.template(TemplateOptions(date=DATE))
    ctx = [{"role": "user", "content": "What is 12 * 3?"}, {"role": "assistant", "content": text}]
    up = user_turn_prompt(tpl, ctx)
    params = SamplingParams(temperature=temperature, max_tokens=max_tokens, stop=up.stop)
    return GenRequest(prompt=up.prompt, role="user", params=params, seeds=seeds)


def test_greedy_batch_equals_single_and_finish(hf: HFBackend) -> None:
    """Left padding doesn't change greedy outputs; a 1-token budget finishes 'length'."""
    short = _user_request(hf, "36.", 0.0, (1,))
    long = _user_request(hf, "12 * 3 = 36, because 12 + 12 + 12 = 36. The answer is 36.", 0.0, (2,))
    both = hf.generate([short, long])
    alone = hf.generate([long])
    assert both[1].completions == alone[0].completions
    assert both[0].prompt_tokens == len(hf.tokenize(short.prompt))
    one = _user_request(hf, "36.", 0.0, (1,), max_tokens=1)
    (res,) = hf.generate([one])
    assert res.completions[0].finish == "length"
    assert res.completions[0].completion_tokens == 1
    assert res.completions[0].text == both[0].completions[0].text[: len(res.completions[0].text)]


def test_seeds_are_per_sample(hf: HFBackend) -> None:
    """A seed gives the same sample whatever shares its batch; other seeds differ."""
    req = _user_request(hf, "36.", 1.0, (11, 12, 13))
    solo = _user_request(hf, "36.", 1.0, (12,))
    other = _user_request(hf, "The answer is 36.", 1.0, (99,))
    a = hf.generate([req])[0].completions
    b = hf.generate([other, solo])[1].completions
    assert len(a) == 3
    assert a[1] == b[0]
    assert len({c.text for c in a}) > 1


def test_decode_rows_cuts_like_llamacpp(hf: HFBackend) -> None:
    tok = hf.tokenizer
    eos = hf.eos_ids()
    params = SamplingParams(max_tokens=8, stop=("<|im_start|>assistant",))
    hello = tok("Hello there", add_special_tokens=False)["input_ids"]
    header = tok("<|im_start|>assistant\nhi", add_special_tokens=False)["input_ids"]
    end = tok.convert_tokens_to_ids("<|im_end|>")
    at_eos, at_stop, plain = decode_rows(
        [[*hello, end, end], hello + header, hello * 4], tok, eos, params
    )
    assert (at_eos.text, at_eos.finish, at_eos.completion_tokens) == (
        "Hello there",
        "stop",
        len(hello) + 1,
    )
    assert (at_stop.text, at_stop.finish) == ("Hello there", "stop")
    assert plain.finish == "length"
    artifact = decode_rows(
        [tok("<|im_start|>user", add_special_tokens=False)["input_ids"]],
        tok,
        eos,
        SamplingParams(max_tokens=8),
    )[0]
    assert artifact.text == "<|im_start|>user"  # template artifacts stay visible


def test_batching_is_deterministic_and_left_padded() -> None:
    p = SamplingParams(temperature=1.0)
    g = SamplingParams(temperature=0.0)
    rows = [Row(0, 0, (1, 2, 3), 5, p), Row(1, 0, (1,), 6, g), Row(2, 0, (4, 5), 7, p)]
    batches = _batches(rows, 8)
    assert [[r.request for r in b] for b in batches] == [[2, 0], [1]]
    ids, mask = padded_batch([(1, 2, 3), (4,)], pad_id=0)
    assert ids.tolist() == [[1, 2, 3], [0, 0, 4]]
    assert mask.tolist() == [[1, 1, 1], [0, 0, 1]]


def test_lora_adapter(hf: HFBackend, tmp_path: Path) -> None:
    """``?adapter=DIR`` applies a PEFT LoRA on top; the id and revision say so."""
    peft = pytest.importorskip("peft")
    import torch

    torch.manual_seed(0)
    cfg = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    lora = peft.get_peft_model(hf.model, cfg)
    with torch.no_grad():
        for name, param in lora.named_parameters():
            if "lora_B" in name:
                param.mul_(50.0)  # big enough to change the greedy tokens
    adapter = tmp_path / "my-lora"
    lora.save_pretrained(adapter)
    lora.unload()  # restore the shared module-scoped base model
    tuned = load_backend(f"hf:smollm2-135m?adapter={adapter}&threads=1")
    try:
        assert tuned.model_id == "hf:smollm2-135m+my-lora"
        assert "+adapter:" in tuned.revision and tuned.revision != hf.revision
        req = _user_request(hf, "36.", 0.0, (1,))
        base = hf.generate([req])[0].completions[0].text
        assert tuned.generate([req])[0].completions[0].text != base
    finally:
        tuned.close()
    with pytest.raises(UserError, match="adapter"):
        load_backend(f"hf:smollm2-135m?adapter={tmp_path / 'missing'}")


def test_markers_from_hf_template(hf: HFBackend) -> None:
    tpl = hf.template(TemplateOptions(date=DATE))
    markers = derive_markers(tpl)
    assert markers.user_header == "<|im_start|>user\n"
    assert "<|im_end|>" in markers.user_stops(tpl)


def test_progress_bars_off_when_stderr_is_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the HF export of a GGUF draws three tqdm bars; in a log file or CI (stderr
    not a terminal) the loader turns them off."""
    import io
    import sys

    import transformers

    from userturn.hfmodel import _transformers

    monkeypatch.setattr(sys, "stderr", io.StringIO())
    transformers.utils.logging.enable_progress_bar()
    _transformers()
    assert not transformers.utils.logging.is_progress_bar_enabled()
