"""Every registered ``?key=value`` option, through the registry's parse and into the plugin.

Run: ``.venv/bin/python -m pytest tests/test_options.py -q`` (a few seconds; the add_bos
and instruction cases use the fault server and the gsm-symbolic mirror).

Why: an option used to be checked by the registry and then read again, as text, by the
plugin, so a spelling could validate and then be ignored (``openai:M?add_bos=on`` read
as False, ``vllm:M?ray=yes`` dropped). Now the registry parses once and the plugin gets
a typed dataclass; these tests hold every option to that: each valid spelling arrives,
typed, in the field the plugin reads.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest

from fault_server import FaultServer
from userturn import registry
from userturn.backends import load_backend
from userturn.datasets import load_dataset
from userturn.http import HTTPOptions
from userturn.judges.llm import JudgeOptions
from userturn.registry import FALSE, TRUE, Option, Plugin


def _options_class(plugin: Plugin) -> Any:
    try:
        return plugin.load().Options
    except Exception as exc:  # a plugin whose extra isn't installed here
        pytest.skip(f"{plugin.name}: {exc}")


def _spellings(opt: Option) -> Iterator[tuple[str, Any]]:
    """Valid texts for ``opt`` and the value each must arrive as, worked out here."""
    if opt.type == "bool":
        for raw in sorted(TRUE | FALSE):
            for text in (raw, raw.upper(), raw.capitalize()):
                yield text, raw in TRUE
    elif opt.choices:
        yield from ((c, c) for c in opt.choices)
    elif opt.type == "int":
        low = int(opt.min) if opt.min is not None else 0
        yield from ((str(v), v) for v in {low, low + 1, low + 7} if opt.max is None or v <= opt.max)
    elif opt.type == "float":
        low = float(opt.min or 0.0)
        high = float(opt.max) if opt.max is not None else low + 10
        yield from ((repr(v), v) for v in (low, (low + high) / 2, high))
    else:
        yield from (("x", "x"), ("a/b c.gguf", "a/b c.gguf"))


def _schemas() -> Iterator[tuple[str, Plugin, Any]]:
    for kind in ("model", "dataset"):
        for plugin in registry.REGISTRY[kind].values():  # type: ignore[index]
            yield f"{kind}:{plugin.name}", plugin, None
    yield "judge:llm", Plugin("judge", "llm", "", "", options=registry.JUDGE_LLM), JudgeOptions
    yield "http", Plugin("model", "http", "", "", options=registry.HTTP), HTTPOptions


SCHEMAS = list(_schemas())


@pytest.mark.parametrize(("name", "plugin", "cls"), SCHEMAS, ids=[s[0] for s in SCHEMAS])
def test_every_option_validates_into_the_field_the_plugin_reads(
    name: str, plugin: Plugin, cls: Any
) -> None:
    cls = cls or _options_class(plugin)
    fields = {f.name for f in dataclasses.fields(cls)}
    assert fields == set(plugin.options), f"{name}: options without a field or fields unlisted"
    for key, opt in plugin.options.items():
        for text, want in _spellings(opt):
            got = getattr(plugin.typed(cls, {key: text}), key)
            assert got == want and type(got) is type(want), (name, key, text, got)
    with pytest.raises(Exception, match="unknown option"):
        plugin.typed(cls, {"no_such_option": "1"})


def test_a_bool_option_refuses_other_words_in_one_line() -> None:
    from userturn.errors import UserError

    with pytest.raises(UserError, match=r"ray='maybe': expected on or off"):
        registry.model_spec("vllm:m?ray=maybe")


@pytest.mark.parametrize("spelling", ["on", "yes", "True", "1"])
def test_openai_add_bos_is_honoured_in_every_spelling(spelling: str) -> None:
    with FaultServer(lifetime=60) as srv:
        backend = load_backend(f"openai:m?base_url={srv.base_url}&add_bos={spelling}")
        assert backend.runtime_adds_bos is True
        off = load_backend(f"openai:m?base_url={srv.base_url}&add_bos=off")
        assert off.runtime_adds_bos is False


def test_gsm_symbolic_instruction_off_drops_the_instruction() -> None:
    (with_it,) = load_dataset("gsm-symbolic?lang=deu").load_first(1)
    for spelling in ("off", "no", "false", "0"):
        (plain,) = load_dataset(f"gsm-symbolic?lang=deu&instruction={spelling}").load_first(1)
        assert "\\boxed{}" in with_it.messages[0]["content"]
        assert "\\boxed{}" not in plain.messages[0]["content"], spelling
