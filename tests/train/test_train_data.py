"""Loss masks from real chat templates, the conversation sources, token-level labels.

Run: ``.venv/bin/python -m pytest tests/train/test_train_data.py -q`` (a few seconds; the
token-level tests load only the embedded model's tokenizer).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from userturn.chat import ChatTemplate, derive_markers
from userturn.errors import UserError
from userturn.train.data import (
    IGNORE,
    build_examples,
    conversations,
    render_with_spans,
    tokenize_rendered,
)

MESSAGES = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "It is 4."},
    {"role": "user", "content": "And 3+3?"},
    {"role": "assistant", "content": "6."},
]


def templates(shared: Path) -> list[Path]:
    return sorted((shared / "chat_templates").glob("*.jinja"))


def load(path: Path) -> ChatTemplate:
    return ChatTemplate(
        path.read_text(encoding="utf-8"), path.name, bos_token="<s>", eos_token="</s>"
    )


def closes(tpl: ChatTemplate, role: str, tail: str) -> bool:
    """``tail`` is a way the probe knows a turn of ``role`` ended (or nothing, at the end
    of a template that writes no end marker)."""
    m = derive_markers(tpl)
    stops = m.user_stops(tpl) if role == "user" else m.answer_stops(tpl)
    ends = {m.user_end if role == "user" else m.assistant_end, *stops, ""}
    return tail in ends or tail.strip() in ends or tail in {"<|end|>"}


def test_user_mask_on_every_real_template(shared_dir: Path) -> None:
    """``user``: only the follow-up (never the opening request) plus its end marker."""
    paths = templates(shared_dir)
    assert len(paths) >= 10
    for path in paths:
        tpl = load(path)
        r = render_with_spans(tpl, MESSAGES, "user")
        assert [s.index for s in r.spans] == [2], path.name
        text = r.trained_text()[0]
        assert text.startswith("And 3+3?"), (path.name, text)
        assert "What is 2+2?" not in "".join(r.trained_text())
        tail = text[len("And 3+3?") :]
        assert tail and closes(tpl, "user", tail), (path.name, tail)


def test_assistant_and_both_masks_on_every_real_template(shared_dir: Path) -> None:
    for path in templates(shared_dir):
        tpl = load(path)
        asst = render_with_spans(tpl, MESSAGES, "assistant")
        assert [s.index for s in asst.spans] == [1, 3], path.name
        for span, content in zip(asst.trained_text(), ("It is 4.", "6."), strict=True):
            assert span.startswith(content), (path.name, span)
            assert closes(tpl, "assistant", span[len(content) :]), (path.name, span)
        both = render_with_spans(tpl, MESSAGES, "both")
        assert [s.index for s in both.spans] == [1, 2, 3], path.name
        starts = [s.start for s in both.spans]
        assert starts == sorted(starts)


def test_short_content_that_matches_a_header_word(shared_dir: Path) -> None:
    """A follow-up that reads "user" must be found after its header, not inside it."""
    tpl = load(shared_dir / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja")
    msgs = [
        {"role": "user", "content": "user"},
        {"role": "assistant", "content": "assistant"},
        {"role": "user", "content": "user"},
    ]
    r = render_with_spans(tpl, msgs, "user")
    assert r.trained_text() == ["user<|im_end|>\n"]
    assert r.text[: r.spans[0].start].endswith("<|im_start|>user\n")


def test_unknown_loss_target_is_a_user_error(shared_dir: Path) -> None:
    tpl = load(shared_dir / "chat_templates" / "Qwen-Qwen2.5-7B-Instruct.jinja")
    with pytest.raises(UserError, match="loss-on"):
        render_with_spans(tpl, MESSAGES, "everything")  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def smol_tokenizer() -> object:
    pytest.importorskip("transformers")
    from userturn.hfmodel import load_tokenizer

    return load_tokenizer("smollm2-135m")


def test_token_labels_with_the_embedded_tokenizer(smol_tokenizer: object) -> None:
    from userturn.train.data import template_from_tokenizer

    tok = smol_tokenizer
    tpl = template_from_tokenizer(tok, "smollm2-135m")
    ex = tokenize_rendered(tok, render_with_spans(tpl, MESSAGES, "user"), max_length=512)
    trained = [t for t, lab in zip(ex.input_ids, ex.labels, strict=True) if lab != IGNORE]
    assert trained == [lab for lab in ex.labels if lab != IGNORE]
    assert tok.decode(trained) == "And 3+3?<|im_end|>\n"  # type: ignore[attr-defined]
    full = tok(tpl.render(MESSAGES), add_special_tokens=False)["input_ids"]  # type: ignore[operator]
    assert ex.input_ids == full  # no BOS added: the template's text is the whole prompt


def test_truncation_drops_conversations_without_trained_tokens(
    smol_tokenizer: object, tmp_path: Path
) -> None:
    from userturn.train.data import template_from_tokenizer

    tpl = template_from_tokenizer(smol_tokenizer, "smollm2-135m")
    long = {
        "messages": [
            {"role": "user", "content": "word " * 300},
            {"role": "assistant", "content": "ok"},
            {"role": "user", "content": "and then?"},
        ]
    }
    short = {"messages": MESSAGES}
    path = tmp_path / "c.jsonl"
    path.write_text(json.dumps(long) + "\n" + json.dumps(short) + "\n", encoding="utf-8")
    examples, stats = build_examples(
        smol_tokenizer, tpl, conversations(str(path)), "user", max_examples=10, max_length=64
    )
    assert (stats.read, stats.used) == (2, 1)
    assert stats.skipped == {"no trained token within max_length": 1}
    assert len(examples[0].input_ids) <= 64
    assert stats.trained_tokens == examples[0].trained_tokens > 0


def test_jsonl_sources_both_shapes_and_bad_lines(tmp_path: Path) -> None:
    path = tmp_path / "c.jsonl"
    rows = [
        {"messages": MESSAGES},
        {"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    convs = list(conversations(f"jsonl:{path}"))
    assert convs[0] == MESSAGES
    assert convs[1] == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    path.write_text(json.dumps({"messages": MESSAGES}) + '\n{"text": 1}\n', encoding="utf-8")
    with pytest.raises(UserError) as err:
        list(conversations(str(path)))
    assert f"{path}:2" in str(err.value)
    with pytest.raises(UserError, match="sharegpt"):
        list(conversations(str(tmp_path / "missing.jsonl")))


def test_sharegpt_mirror_gives_checked_conversations() -> None:
    """The real (truncated) ShareGPT file, read only as far as needed."""
    first = []
    for conv in conversations("sharegpt"):
        first.append(conv)
        if len(first) == 5:
            break
    assert len(first) == 5
    for conv in first:
        roles = [m["role"] for m in conv if m["role"] != "system"]
        assert roles[0] == "user"
        assert all(a != b for a, b in itertools.pairwise(roles))


def test_content_part_lists_train_as_their_text(tmp_path: Path) -> None:
    """OpenAI-style ``[{"type": "text", "text": ...}]`` contents are joined as text, never
    rendered as the list's Python repr."""
    from userturn.train.data import conversations

    parts = [{"type": "text", "text": "Hi "}, {"type": "text", "text": "there"}]
    row = {"messages": [{"role": "user", "content": parts}, {"role": "assistant", "content": "Yo"}]}
    path = tmp_path / "parts.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    (conv,) = list(conversations(str(path)))
    assert [m["content"] for m in conv] == ["Hi there", "Yo"]
