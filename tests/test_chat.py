"""User-turn prompts, derived markers and reasoning splits, on the real templates in
../shared/chat_templates (exact parity with transformers: ``test_chat_templates.py``).

Run: ``.venv/bin/python -m pytest tests/test_chat.py -q``
"""

from __future__ import annotations

import datetime as dt

import pytest

from shared_files import SHARED
from userturn.chat import (
    ChatTemplate,
    SystemPlacement,
    answer_finish,
    answer_prompt,
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
    "Apertus-8B-Instruct.jinja": ("<s>", "</s>", "<|user_start|>", "<|assistant_start|>"),
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
    "deepseek-ai-DeepSeek-V3.2.jinja": (
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
    "tencent-Hy3.jinja": (
        "<｜hy_begin_of_sentence:opensource｜>",
        "<｜hy_eos:opensource｜>",
        "<｜hy_User:opensource｜>",
        "<｜hy_Assistant:opensource｜>",
    ),
}
MISTRAL = "mistralai-Mistral-Nemo-Instruct-2407.jinja"
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
    placement: SystemPlacement = "first-turn" if name == MISTRAL else "template"
    up = user_turn_prompt(tpl, context(name), markers, system_placement=placement)
    assert EXPECTED[name][3] in up.stop
    assert "USERTURN_SENTINEL" not in up.prompt
    assert up.content_survived and up.removed is None
    assert "The answer is 4." in up.prompt and "And 3+3? Show work." in up.prompt
    assert up.prompt.endswith(markers.user_header)
    if name not in NO_SYSTEM:
        assert "Be brief." in up.prompt
    assert up.system_folded == (name == MISTRAL)


def test_system_text_never_prefills_the_generated_user_turn() -> None:
    """Mistral renders the system message into the *last* user turn: in a user-turn
    prompt that is the generated one. The default refuses; ``first-turn`` folds the
    system text into the first user turn, where the conversation started."""
    tpl = load(MISTRAL)
    with pytest.raises(UserError, match=r"Mistral-Nemo.*system_placement.*first-turn"):
        user_turn_prompt(tpl, context(MISTRAL))
    assert derive_markers(tpl).system_in_new_turn
    up = user_turn_prompt(tpl, context(MISTRAL), system_placement="first-turn")
    assert up.prompt == (
        "<s>[INST]Be brief.\n\nWhat is 2+2?[/INST]4</s>"
        "[INST]And 3+3? Show work.[/INST]The answer is 4.</s>[INST]"
    )
    answer = answer_prompt(tpl, context(MISTRAL)[:-1], system_placement="first-turn")
    assert up.prompt.startswith(answer)  # the user-turn prompt extends the answer prompt
    for name in ("Qwen3.5-4B.jinja", "meta-llama-Llama-3.1-8B-Instruct.jinja"):
        assert not derive_markers(load(name)).system_in_new_turn
        kept = user_turn_prompt(load(name), context(name), system_placement="first-turn")
        assert kept == user_turn_prompt(load(name), context(name))


def test_unknown_system_placement_is_refused() -> None:
    with pytest.raises(UserError, match="system_placement"):
        user_turn_prompt(load(MISTRAL), context(MISTRAL), system_placement="last")  # type: ignore[arg-type]


def test_apertus_user_header_stops_at_a_token_boundary() -> None:
    """``<|developer_end|>`` and ``<|assistant_end|>`` share ``_end|>``: the header must
    not start inside a special token, and the assistant's end marker (written only when
    a user turn follows) must be an answer stop."""
    tpl = load("Apertus-8B-Instruct.jinja")
    markers = derive_markers(tpl)
    assert markers.user_header == "<|user_start|>"
    assert markers.assistant_end == "<|assistant_end|>"
    assert "<|assistant_end|>" in markers.answer_stops(tpl)
    assert "_end|><|user_start|>" not in markers.answer_stops(tpl)


@pytest.mark.parametrize(
    ("name", "bare"),
    [
        ("deepseek-ai-DeepSeek-V3.2.jinja", "<｜Assistant｜>"),
        ("tencent-Hy3.jinja", "<｜hy_Assistant:opensource｜>"),
    ],
)
def test_bare_assistant_marker_stops_a_user_turn(name: str, bare: str) -> None:
    """The generation prompt is ``<｜Assistant｜><think></think>``; a model that writes the
    role marker alone has still left the user's turn."""
    tpl = load(name)
    assert bare in derive_markers(tpl).user_stops(tpl)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_content_with_jinja_and_tags_survives_verbatim(name: str) -> None:
    tricky = "Use {{ x }} and {% raw %} or <b>bold</b>, <|im_end|>-like text & 'quotes'."
    placement: SystemPlacement = "first-turn" if name == MISTRAL else "template"
    up = user_turn_prompt(load(name), context(name, tricky), system_placement=placement)
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
    assert (parts.reasoning, parts.final, parts.complete) == ("think", "4", True)
    assert split_reasoning("plain") == split_reasoning("plain", opened=False)
    assert split_reasoning("plain").reasoning is None and split_reasoning("plain").complete
    hy = split_reasoning("<think:opensource>r</think:opensource>It is 4.")
    assert (hy.reasoning, hy.final) == ("r", "It is 4.")
    assert has_thinking_markup("ok <think> hmm") and not has_thinking_markup("fine, thanks")
    assert has_thinking_markup("<think:opensource>hm")


@pytest.mark.parametrize(
    ("text", "opened"),
    [
        ("Let me add 2 and 2. First,", True),  # the generation prompt opened <think>
        ("<think>\nLet me add 2 and 2. First,", False),  # the model opened it
        ("<think:opensource>Let me add 2 and 2. First,", False),
        ("<|channel|>analysis<|message|>Let me add 2 and 2. First,", False),  # gpt-oss
    ],
)
def test_answer_cut_inside_reasoning_has_no_final_answer(text: str, opened: bool) -> None:
    parts = split_reasoning(text, opened=opened)
    assert parts.final == "" and not parts.complete
    assert parts.reasoning is not None and parts.reasoning.endswith("Let me add 2 and 2. First,")
    assert answer_finish("length", parts) == "length_in_reasoning"
    assert history_message(text, "strip", opened=opened)["content"] == ""
    assert history_message(text, "template", opened=opened)["reasoning_content"] == parts.reasoning


def test_closed_reasoning_keeps_the_backend_finish() -> None:
    parts = split_reasoning("2+2 is 4.\n</think>\n\nIt is 4", opened=True)
    assert (parts.final, parts.complete) == ("It is 4", True)
    assert answer_finish("length", parts) == "length"
    assert answer_finish("stop", split_reasoning("It is 4.")) == "stop"


@pytest.mark.parametrize(
    ("name", "kwargs", "opens"),
    [
        ("Qwen3.5-4B.jinja", {}, True),
        ("Qwen3.5-4B.jinja", {"enable_thinking": False}, False),
        ("Qwen-Qwen3-0.6B.jinja", {}, False),  # the model writes <think> itself
        ("deepseek-ai-DeepSeek-V3.2.jinja", {"enable_thinking": True}, True),
        ("deepseek-ai-DeepSeek-V3.2.jinja", {}, False),
        ("tencent-Hy3.jinja", {"reasoning_effort": "high"}, True),
        ("tencent-Hy3.jinja", {}, False),
        ("openai-gpt-oss-120b.jinja", {}, False),  # the model opens its analysis channel
        ("meta-llama-Llama-3.1-8B-Instruct.jinja", {}, False),
    ],
)
def test_markers_say_whether_the_generation_prompt_opens_reasoning(
    name: str, kwargs: dict[str, object], opens: bool
) -> None:
    assert derive_markers(load(name), **kwargs).opens_reasoning is opens
