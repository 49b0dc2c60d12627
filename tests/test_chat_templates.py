"""Our rendering against transformers' own renderer, on every real template.

For every template in ``shared/chat_templates`` (and two inline templates of shapes no
shared one has: Phi-3's, which appends ``eos_token`` when ``add_generation_prompt`` is
false, and early Phi-3's, whose user turn always runs into the assistant header), under each
template switch it reads (``enable_thinking``, ``reasoning_effort``), and for several
conversations (single turn, system message, multi-turn, reasoning in history):

- the user-turn prompt equals transformers' ``render_jinja_template`` of
  ``context + [user SENTINEL]`` cut before the sentinel; where that cut would pre-fill
  the user's turn (Mistral folds the system text into the last user turn), the default
  policy refuses and ``first-turn`` equals transformers on the conversation with the
  system text folded into the first user message;
- the answer prompt equals transformers' render with ``add_generation_prompt=True``;
- the derived markers are sane: a non-empty user header that ends the prompt, the
  template's real end-of-turn marker among the answer stops, its assistant marker
  among the user-turn stops.

Run: ``.venv/bin/python -m pytest tests/test_chat_templates.py -q``
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import jinja2
import pytest

from shared_files import SHARED
from userturn.chat import (
    SENTINEL,
    ChatTemplate,
    TurnMarkers,
    answer_prompt,
    derive_markers,
    user_turn_prompt,
)
from userturn.errors import UserError

chat_template_utils = pytest.importorskip("transformers.utils.chat_template_utils")

TEMPLATES = SHARED / "chat_templates"
DATE = dt.date(2026, 11, 29)
SYSTEM = "You are terse."
PHI3 = "phi-3-pattern (inline)"
NO_GEN = "no-generation-prompt (inline)"
INLINE = {
    # Phi-3/3.5's shape: eos_token ends a render without the generation prompt
    PHI3: (
        "{% for m in messages %}"
        "{% if m['role'] in ['system', 'user', 'assistant'] %}"
        "{{ '<|' ~ m['role'] ~ '|>\\n' ~ m['content'] ~ '<|end|>\\n' }}"
        "{% endif %}"
        "{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|assistant|>\\n' }}{% else %}{{ eos_token }}{% endif %}"
    ),
    # early Phi-3's shape: a user turn always runs into the assistant header
    NO_GEN: (
        "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
        "{{ '<|user|>\\n' ~ m['content'] ~ '<|end|>\\n<|assistant|>\\n' }}"
        "{% elif m['role'] == 'assistant' %}{{ m['content'] ~ '<|end|>\\n' }}{% endif %}"
        "{% endfor %}"
    ),
}

# name -> (bos, eos, the real end of an assistant turn, the assistant marker a user turn
# must stop on)
FAMILY = {
    "Apertus-8B-Instruct.jinja": ("<s>", "</s>", "<|assistant_end|>", "<|assistant_start|>"),
    "GLM-4.6.jinja": ("", "<|endoftext|>", "<|user|>", "<|assistant|>"),
    "GLM-4.7-Flash.jinja": ("", "<|endoftext|>", "<|user|>", "<|assistant|>"),
    "HuggingFaceTB-SmolLM3-3B.jinja": ("", "<|im_end|>", "<|im_end|>", "<|im_start|>assistant"),
    "Qwen-Qwen2.5-7B-Instruct.jinja": ("", "<|im_end|>", "<|im_end|>", "<|im_start|>assistant"),
    "Qwen-Qwen3-0.6B.jinja": ("", "<|im_end|>", "<|im_end|>", "<|im_start|>assistant"),
    "Qwen3.5-4B.jinja": ("", "<|im_end|>", "<|im_end|>", "<|im_start|>assistant"),
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": (
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        "<｜Assistant｜>",
    ),
    "deepseek-ai-DeepSeek-V3.2.jinja": (
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        "<｜Assistant｜>",
    ),
    "google-gemma-2-2b-it.jinja": ("<bos>", "<eos>", "<end_of_turn>", "<start_of_turn>model"),
    "meta-llama-Llama-3.1-8B-Instruct.jinja": (
        "<|begin_of_text|>",
        "<|eot_id|>",
        "<|eot_id|>",
        "<|start_header_id|>assistant<|end_header_id|>",
    ),
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": ("<s>", "</s>", "</s>", "[/INST]"),
    "openai-gpt-oss-120b.jinja": ("", "<|return|>", "<|return|>", "<|start|>assistant"),
    "tencent-Hy3.jinja": (
        "<｜hy_begin_of_sentence:opensource｜>",
        "<｜hy_eos:opensource｜>",
        "<｜hy_eos:opensource｜>",
        "<｜hy_Assistant:opensource｜>",
    ),
    PHI3: ("<s>", "<|endoftext|>", "<|end|>", "<|assistant|>"),
    NO_GEN: ("<s>", "<|endoftext|>", "<|end|>", "<|end|>"),
}

QA = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4"},
]
FOLLOW = [
    {"role": "user", "content": "And 3+3? Show work."},
    {"role": "assistant", "content": "3+3 = 6."},
]
THOUGHT = {"reasoning_content": "Add three and three."}
CONVERSATIONS: dict[str, list[dict[str, Any]]] = {
    "single": QA,
    "system": [{"role": "system", "content": SYSTEM}, *QA],
    "multi": [*QA, *FOLLOW],
    "multi-system": [{"role": "system", "content": SYSTEM}, *QA, *FOLLOW],
    "reasoning": [QA[0], {**QA[1], "reasoning_content": "Two plus two."}],
    "multi-reasoning": [
        QA[0],
        {**QA[1], "reasoning_content": "Two plus two."},
        FOLLOW[0],
        {**FOLLOW[1], **THOUGHT},
    ],
}


def source(name: str) -> str:
    if name in INLINE:
        return INLINE[name]
    return (TEMPLATES / name).read_text(encoding="utf-8")


def template_names() -> list[str]:
    shared = sorted(p.name for p in TEMPLATES.glob("*.jinja")) if TEMPLATES.is_dir() else []
    return [*shared, *INLINE]


def switches(text: str) -> list[dict[str, Any]]:
    """The template's own switches worth rendering under, besides its defaults."""
    out: list[dict[str, Any]] = [{}]
    if "enable_thinking" in text:
        out += [{"enable_thinking": True}, {"enable_thinking": False}]
    if "reasoning_effort" in text:
        out.append({"reasoning_effort": "high"})
    return out


def cases() -> Iterator[Any]:
    for name in template_names():
        text = source(name) if name in INLINE or TEMPLATES.is_dir() else ""
        for kwargs in switches(text):
            label = ",".join(f"{k}={v}" for k, v in kwargs.items()) or "default"
            yield pytest.param(name, kwargs, id=f"{name}-{label}")


@pytest.fixture(autouse=True)
def frozen_hf_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """transformers' ``strftime_now`` reads the wall clock; ours reads the run's date."""

    class Frozen(dt.datetime):
        @classmethod
        def now(cls, tz: dt.tzinfo | None = None) -> Frozen:
            return cls.combine(DATE, dt.time(12, 0))

    monkeypatch.setattr(chat_template_utils, "datetime", Frozen)


def load(name: str) -> ChatTemplate:
    if name not in INLINE and not TEMPLATES.is_dir():
        pytest.skip(f"shared/chat_templates not found at {TEMPLATES}")
    bos, eos, _, _ = FAMILY[name]
    return ChatTemplate(source(name), name, bos, eos, date=DATE)


def hf(tpl: ChatTemplate, messages: list[dict[str, Any]], gen: bool, **kwargs: Any) -> str:
    rendered, _ = chat_template_utils.render_jinja_template(
        conversations=[messages],
        chat_template=tpl.source,
        add_generation_prompt=gen,
        bos_token=tpl.bos_token,
        eos_token=tpl.eos_token,
        **kwargs,
    )
    return str(rendered[0])


def hf_user_cut(tpl: ChatTemplate, context: list[dict[str, Any]], **kwargs: Any) -> str:
    full = hf(tpl, [*context, {"role": "user", "content": SENTINEL}], False, **kwargs)
    return full[: full.index(SENTINEL)]


def fold_system(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The documented ``first-turn`` policy, written out by hand: the system text joins
    the first user message the way Mistral joins them."""
    first, *rest = messages[1:]
    return [{**first, "content": SYSTEM + "\n\n" + first["content"]}, *rest]


def prefills(cut: str, context: list[dict[str, Any]]) -> bool:
    """The system text sits after the last assistant turn: inside the new user turn."""
    return context[0]["role"] == "system" and cut.rfind(SYSTEM) > cut.rfind(context[-1]["content"])


def check_markers(name: str, tpl: ChatTemplate, markers: TurnMarkers) -> None:
    _, _, end, assistant = FAMILY[name]
    assert markers.user_header.strip(), "empty user header"
    assert end in markers.answer_stops(tpl)
    assert assistant in markers.user_stops(tpl)


def check_user_turn(
    tpl: ChatTemplate, markers: TurnMarkers, context: list[dict[str, Any]], **kwargs: Any
) -> str:
    """Our user-turn prompt against transformers' sentinel cut; returns the policy used."""
    expected = hf_user_cut(tpl, context, **kwargs)
    if prefills(expected, context):
        with pytest.raises(UserError, match="system_placement"):
            user_turn_prompt(tpl, context, markers, **kwargs)
        expected = hf_user_cut(tpl, fold_system(context), **kwargs)
        got = user_turn_prompt(tpl, context, markers, system_placement="first-turn", **kwargs)
        assert got.system_folded
        policy = "first-turn"
    else:
        got = user_turn_prompt(tpl, context, markers, **kwargs)
        folded = user_turn_prompt(tpl, context, markers, system_placement="first-turn", **kwargs)
        assert folded.prompt == got.prompt and not folded.system_folded
        policy = "template"
    assert got.prompt == expected
    assert expected.endswith(markers.user_header)
    return policy


def check_answer(
    tpl: ChatTemplate, markers: TurnMarkers, messages: list[dict[str, Any]], policy: str, **kw: Any
) -> None:
    ours = answer_prompt(tpl, messages, markers=markers, **kw)
    assert ours == hf(tpl, messages, True, **kw)
    if policy == "first-turn":
        folded = answer_prompt(tpl, messages, system_placement="first-turn", markers=markers, **kw)
        assert folded == hf(tpl, fold_system(messages), True, **kw)


@pytest.mark.parametrize(("name", "kwargs"), list(cases()))
def test_rendering_matches_transformers(name: str, kwargs: dict[str, Any]) -> None:
    tpl = load(name)
    markers = derive_markers(tpl, **kwargs)
    check_markers(name, tpl, markers)
    for conv, context in CONVERSATIONS.items():
        try:
            hf(tpl, context, False, **kwargs)
        except jinja2.TemplateError:  # the template refuses it (Gemma-2: system role)
            with pytest.raises(UserError, match="chat template raised"):
                user_turn_prompt(tpl, context, markers, **kwargs)
            continue
        # the whole conversation, ending on the assistant (reasoning shown where the
        # template shows the last turn's reasoning: gpt-oss reads it as ``thinking``)
        assert tpl.render(context, **kwargs) == hf(tpl, context, False, **kwargs)
        policy = check_user_turn(tpl, markers, context, **kwargs)
        check_answer(tpl, markers, context[:-1], policy, **kwargs)
        assert conv  # every conversation reached a comparison or an expected refusal


def test_unset_tools_and_reasoning_names_render_as_in_transformers() -> None:
    """transformers passes ``tools=None`` (so ``tools is not none`` is false, where an
    undefined ``tools`` would make it true) and gives reasoning every name templates
    read it under."""
    tpl = ChatTemplate(
        "{% if tools is not none %}[TOOLS]{% endif %}{% for m in messages %}"
        "<{{ m.role }}>{{ m.thinking or '' }}|{{ m.reasoning or '' }}|{{ m.content }}"
        "{% endfor %}",
        "inline.jinja",
        date=DATE,
    )
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
    ]
    assert tpl.render(msgs) == hf(tpl, msgs, False) == "<user>||q<assistant>r||a"


def test_phi3_pattern_derives_markers() -> None:
    """Phi-3 ends a non-generation render with ``eos_token``, which the generation prompt
    replaces: the generation prompt is not a plain append, and is derived anyway."""
    tpl = load(PHI3)
    markers = derive_markers(tpl)
    assert markers.assistant_header == "<|assistant|>\n"
    assert markers.trailer == "<|endoftext|>"
    assert (markers.user_header, markers.user_end, markers.assistant_end) == (
        "<|user|>\n",
        "<|end|>\n",
        "<|end|>\n",
    )


def test_every_shared_template_has_family_tokens() -> None:
    if not TEMPLATES.is_dir():
        pytest.skip(f"shared/chat_templates not found at {TEMPLATES}")
    assert set(template_names()) == set(FAMILY)


# bounded rendering ---------------------------------------------------------------------

ENDLESS = "{% for i in range(100000) %}{% for c in 'x' * 100000 %}{% endfor %}{% endfor %}"
"""10^10 steps, the inner loop over a string: no call, no ``range`` step to check."""


def test_an_endless_template_is_stopped_and_named() -> None:
    t = ChatTemplate(ENDLESS, "endless.jinja")
    with pytest.raises(UserError, match=r"^endless.jinja: chat template stopped: .* longer than"):
        t.render([{"role": "user", "content": "hi"}])


def test_an_endless_template_is_stopped_off_the_main_thread() -> None:
    """Workers render on other threads, where no timer signal reaches: the budget's own
    checks (every ``range`` step and call) stop the nested loop there."""
    import threading

    nested = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    errors: list[BaseException] = []

    def work() -> None:
        try:
            ChatTemplate(nested, "nested.jinja").render([{"role": "user", "content": "hi"}])
        except UserError as exc:
            errors.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join(timeout=300)
    assert not thread.is_alive() and len(errors) == 1
    assert "nested.jinja: chat template stopped" in str(errors[0])


def test_output_bound_scales_with_the_messages() -> None:
    """A template that writes its messages renders 2M-character ones; the same template
    writing 100 MB is refused before it is built."""
    path = SHARED / "chat_templates" / "Qwen-Qwen3-0.6B.jinja"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    real = ChatTemplate(path.read_text(encoding="utf-8"), path.name)
    big = "x" * 2_000_000
    out = real.render([{"role": "user", "content": big}], add_generation_prompt=True)
    assert big in out
    flood = ChatTemplate("{% for i in range(100) %}{{ messages[0]['content'] }}{% endfor %}", "f")
    with pytest.raises(UserError, match=r"^f: chat template stopped: .* over"):
        flood.render([{"role": "user", "content": "y" * 1_000_000}])
