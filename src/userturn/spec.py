"""The one spec grammar used for models, datasets, judges and perturbations.

``[KIND:]TARGET[?key=value&key=value]``: the kind is the text before the first ``:``,
options go after ``?``. Windows-style ``C:\\`` paths are not special-cased; use
``llamacpp:C:\\x.gguf``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from userturn.errors import UserError


@dataclass(frozen=True)
class Spec:
    kind: str
    target: str
    options: dict[str, str] = field(default_factory=dict)
    raw: str = ""

    def option(self, name: str, default: str | None = None) -> str | None:
        return self.options.get(name, default)


def parse_spec(raw: str, *, what: str = "spec", kinds: set[str] | None = None) -> Spec:
    """Parse a spec; with ``kinds``, a text before ``:`` that isn't a known kind is a target.

    That keeps ``smollm2-135m`` (no kind) and ``gsm8k:/data/x.jsonl`` (kind ``gsm8k``)
    unambiguous without quoting rules.
    """
    if not raw or not raw.strip():
        raise UserError(f"empty {what}", field=what)
    body, mark, query = raw.partition("?")
    if mark and (not query or query.startswith("&") or query.endswith("&") or "&&" in query):
        raise UserError(
            f"{what} {raw!r} has an empty option: did the shell split it? Quote every "
            "spec, e.g. 'smollm2-135m?n_ctx=2048&n_threads=1' (an unquoted & starts a "
            "background job, and zsh globs ?)",
            field=what,
        )
    options = dict(parse_qsl(query, keep_blank_values=True)) if query else {}
    kind, sep, target = body.partition(":")
    if not sep or (kinds is not None and kind not in kinds):
        return Spec(kind="", target=body, options=options, raw=raw)
    return Spec(kind=kind, target=target, options=options, raw=raw)
