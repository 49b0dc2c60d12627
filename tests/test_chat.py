"""User-turn prompt rendering against every real template in ../shared/chat_templates.

Run: ``.venv/bin/python -m pytest tests/test_chat.py -q``
"""

from __future__ import annotations

import datetime as dt

import pytest

from shared_files import SHARED
from userturn.chat import (
    ChatTemplate,
    derive_markers,
    has_thinking_markup,
    history_message,
    split_reasoning,
    user_turn_prompt,
)
from userturn.errors import UserError

TEMPLATES = SHARED / "chat_templates"
DATE = dt.date(2026, 11, 29)

# file -> (bos, eos, exact user header, a marker that must be among the user-turn stops)
EXPECTED = {
    "GLM-4.6.jinja": ("", "<|endoftext|>", "<|user|>\n", "<|assistant|>"),
    "GLM-4.7-Flash.jinja": ("", "<|endoftext|>", "<|user|>", "<|assistant|>"),
    "HuggingFaceTB-SmolLM3-3B.jinja": ("", "<|im_end|>", "<|im_start|>user\n", "<|im_end|>"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": ("", "<|im_end|>", "<|im_start|>user\n", "<|im_end|>"),
    "Qwen-Qwen3-0.6B.jinja": ("", "<|im_end|>", "<|im_start|>user\n", "<|im_end|>"),
    "Qwen3.5-4B.jinja": ("", "<|im_end|>", "<|im_start|>user\n", "<|im_end|>"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": (
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        "<｜User｜>",
        "<｜Assistant｜>",
    ),
    "google-gemma-2-2b-it.jinja": ("<bos>", "<eos>", "<start_of_turn>user\n", "<end_of_turn>"),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": (
        "<|begin_of_text|>",
        "<|eot_id|>",
        "<|start_header_id|>user<|end_header_id|>\n\n",
        "<|eot_id|>",
    ),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ("<s>", "</s>", "[INST]", "[/INST]"),
    "openai-gpt-oss-120b.jinja": ("", "<|return|>", "<|start|>user<|message|>", "<|end|>"),
}
NO_SYSTEM = {"google-gemma-2-2b-it.jinja"}  # its template raises on a system message


def load(name: str, runtime_adds_bos: bool = False) -> ChatTemplate:
    if not TEMPLATES.is_dir():
        pytest.skip("shared/chat_templates not found")
    bos, eos, _, _ = EXPECTED[name]
    return ChatTemplate(
        (TEMPLATES / name).read_text(encoding="utf-8"),
        name,
        bos,
        eos,
        date=DATE,
        runtime_adds_bos=runtime_adds_bos,
    )


def test_every_shared_template_is_covered() -> None:
    if not TEMPLATES.is_dir():
        pytest.skip("shared/chat_templates not found")
    assert {p.name for p in TEMPLATES.glob("*.jinja")} == set(EXPECTED)


def context(name: str, answer: str = "The answer is 4.") -> list[dict[str, str]]:
    msgs = [] if name in NO_SYSTEM else [{"role": "system", "content": "Be brief."}]
    return [
        *msgs,
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "And 3+3? Show work."},
        {"role": "assistant", "content": answer},
    ]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_user_header_and_stops(name: str) -> None:
    tpl = load(name)
    markers = derive_markers(tpl)
    assert markers.user_header == EXPECTED[name][2]
    up = user_turn_prompt(tpl, context(name), markers)
    assert EXPECTED[name][3] in up.stop
    assert "USERTURN_SENTINEL" not in up.prompt
    assert up.content_survived and up.removed is None
    assert "The answer is 4." in up.prompt and "And 3+3? Show work." in up.prompt
    if name != "mistralai-Mistral-Nemo-Instruct-2407.jinja":
        assert up.prompt.endswith(markers.user_header)
    else:  # Mistral moves the system text into the last user message, after [INST]
        assert up.prompt.endswith("[INST]Be brief.\n\n")
    if name not in NO_SYSTEM:
        assert "Be brief." in up.prompt


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_content_with_jinja_and_tags_survives_verbatim(name: str) -> None:
    tricky = "Use {{ x }} and {% raw %} or <b>bold</b>, <|im_end|>-like text & 'quotes'."
    up = user_turn_prompt(load(name), context(name, tricky))
    assert tricky in up.prompt
    assert up.content_survived


def test_template_exception_names_the_template() -> None:
    tpl = load("google-gemma-2-2b-it.jinja")
    with pytest.raises(UserError, match=r"google-gemma-2-2b-it\.jinja.*System role"):
        user_turn_prompt(tpl, context("Qwen3.5-4B.jinja"))


def test_strftime_now_uses_the_frozen_date() -> None:
    tpl = load("openai-gpt-oss-120b.jinja")
    up = user_turn_prompt(tpl, context("openai-gpt-oss-120b.jinja"))
    assert "2026-11-29" in up.prompt
    other = ChatTemplate(tpl.source, tpl.name, date=dt.date(2027, 1, 2))
    assert user_turn_prompt(other, context("x")).prompt_sha != up.prompt_sha


def test_generation_tag_and_loop_controls() -> None:
    src = (
        "{% for m in messages %}{% if m['role'] == 'system' %}{% continue %}{% endif %}"
        "<{{ m['role'] }}>{% if m['role'] == 'assistant' %}{% generation %}"
        "{{ m['content'] }}{% endgeneration %}{% else %}{{ m['content'] }}{% endif %}"
        "</{{ m['role'] }}>{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
    )
    tpl = ChatTemplate(src, "inline.jinja", date=DATE)
    up = user_turn_prompt(
        tpl,
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
        ],
    )
    assert up.prompt == "<user>q</user><assistant>a</assistant><user>"
    assert derive_markers(tpl).user_header == "<user>"


def test_sentinel_must_occur_once() -> None:
    tpl = ChatTemplate(
        "{% for m in messages %}{{ m['content'] }}{{ m['content'] }}{% endfor %}",
        "dup.jinja",
        date=DATE,
    )
    with pytest.raises(UserError, match=r"dup\.jinja.*exactly once"):
        user_turn_prompt(
            tpl, [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
        )


def test_rendered_bos_is_stripped_only_when_runtime_adds_it() -> None:
    name = "meta-llama-Llama-3.1-8B-Instruct.jinja"
    kept = user_turn_prompt(load(name, runtime_adds_bos=False), context(name))
    stripped = user_turn_prompt(load(name, runtime_adds_bos=True), context(name))
    assert kept.prompt.startswith("<|begin_of_text|>")
    assert not stripped.prompt.startswith("<|begin_of_text|>")
    assert kept.prompt == "<|begin_of_text|>" + stripped.prompt


def test_history_policy_and_removed_reasoning_is_recorded() -> None:
    name = "Qwen-Qwen3-0.6B.jinja"
    raw = "<think>\n2+2 is basic.\n</think>\n\nIt is 4."
    ctx = context(name)[:-1]
    for policy in ("template", "strip"):
        up = user_turn_prompt(load(name), [*ctx, history_message(raw, policy)])
        assert up.content_survived and "2+2 is basic" not in up.prompt
    kept = user_turn_prompt(load(name), [*ctx, history_message(raw, "keep")])
    assert not kept.content_survived  # Qwen3 strips thinking from earlier turns
    assert kept.removed is not None and "2+2 is basic." in kept.removed


def test_answer_stops_keep_gpt_oss_analysis_channel_open() -> None:
    tpl = load("openai-gpt-oss-120b.jinja")
    stops = derive_markers(tpl).answer_stops(tpl)
    assert "<|return|>" in stops and "<|end|>" not in stops


def test_split_reasoning_formats() -> None:
    assert split_reasoning("<think>r</think>final").final == "final"
    assert split_reasoning("r only</think> x").reasoning == "r only"
    oss = "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>final<|message|>4"
    parts = split_reasoning(oss)
    assert (parts.reasoning, parts.final) == ("think", "4")
    assert split_reasoning("plain").reasoning is None
    assert has_thinking_markup("ok <think> hmm") and not has_thinking_markup("fine, thanks")
