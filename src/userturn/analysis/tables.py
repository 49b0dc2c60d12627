"""The paper's tables from an :class:`~userturn.analysis.Analysis`, as Markdown, CSV and LaTeX.

Shapes follow the paper: accuracy and follow-up per model × dataset (Tables 3/5), the
temperature sweep (Table 4), the perturbation controls, and failure-mode shares per
family. Every table carries the unparseable count beside its rates, because a judge
that fails silently would otherwise look like a model that never follows up.

A :class:`Table` keeps raw values (CSV gets full precision) and a formatted view
(Markdown, LaTeX and HTML get percentages with CIs).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from userturn.analysis.cell import GenerateCell, JudgedCell, LikelihoodCell, RolloutCell
from userturn.analysis.views import AccuracyRow, Analysis
from userturn.types import LABELS


@dataclass(frozen=True)
class Table:
    name: str
    """File stem: ``tables/<name>.md|csv|tex``."""
    title: str
    columns: list[str]
    rows: list[list[Any]]
    """Raw values (numbers, strings, None) for CSV."""
    shown: list[list[str]]
    """The same rows formatted for reading."""
    note: str = ""
    data_columns: list[str] | None = None
    """Headers of ``rows`` when they differ from the shown ones: a shown
    ``rate [95% CI]`` is three numbers (``rate``, ``ci_low``, ``ci_high``) in CSV."""

    @property
    def raw_columns(self) -> list[str]:
        """The headers that go with ``rows``."""
        return self.data_columns if self.data_columns is not None else self.columns

    def to_markdown(self) -> str:
        head = [f"**{self.title}**", ""] if self.title else []
        lines = [
            "| " + " | ".join(_md(c) for c in self.columns) + " |",
            "|" + "|".join("---" for _ in self.columns) + "|",
        ]
        lines += ["| " + " | ".join(_md(v) for v in row) + " |" for row in self.shown]
        tail = ["", self.note] if self.note else []
        return "\n".join(head + lines + tail) + "\n"

    def to_csv(self) -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        writer.writerow(self.raw_columns)
        writer.writerows(["" if v is None else v for v in row] for row in self.rows)
        return buf.getvalue()

    def to_latex(self) -> str:
        spec = "l" * len(self.columns)
        out = [
            r"\begin{table}[t]",
            r"\centering",
            rf"\caption{{{latex_escape(self.title)}}}",
            rf"\begin{{tabular}}{{{spec}}}",
            r"\toprule",
            " & ".join(latex_escape(c) for c in self.columns) + r" \\",
            r"\midrule",
        ]
        out += [" & ".join(latex_escape(v) for v in row) + r" \\" for row in self.shown]
        out += [r"\bottomrule", r"\end{tabular}", r"\end{table}"]
        return "\n".join(out) + "\n"

    def write(self, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for ext, text in (
            ("md", self.to_markdown()),
            ("csv", self.to_csv()),
            ("tex", self.to_latex()),
        ):
            path = folder / f"{self.name}.{ext}"
            path.write_text(text, encoding="utf-8")
            paths.append(path)
        return paths


_LATEX = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}


def latex_escape(text: str) -> str:
    return "".join(_LATEX.get(ch, ch) for ch in str(text))


def _md(text: str) -> str:
    return str(text).replace("|", r"\|").replace("\n", " ")


def pct(x: float | None, digits: int = 1) -> str:
    return "–" if x is None else f"{100 * x:.{digits}f}%"


def rate_ci(rate: float | None, lo: float | None, hi: float | None) -> str:
    if rate is None:
        return "–"
    if lo is None or hi is None:
        return pct(rate)
    return f"{pct(rate)} [{pct(lo)}, {pct(hi)}]"


def temp(t: float | None) -> str:
    return "–" if t is None else f"{t:g}"


R = TypeVar("R")


def _for_judge(rows: Iterable[R], judge: str | None) -> list[R]:
    return [r for r in rows if getattr(r, "judge", None) == judge]


Column = tuple[str, Callable[[Any], Any], Callable[[Any], str]]
"""(header, raw value for CSV, text for reading) of one table column."""


def _build(name: str, title: str, spec: list[Column], rows: list[Any], note: str = "") -> Table:
    return Table(
        name=name,
        title=title,
        columns=[s[0] for s in spec],
        rows=[[raw(r) for _, raw, _ in spec] for r in rows],
        shown=[[fmt(r) for _, _, fmt in spec] for r in rows],
        note=note,
    )


def _key(k: str) -> Callable[[Any], Any]:
    return lambda r: getattr(r, k)


def _str(k: str) -> Callable[[Any], str]:
    return lambda r: "–" if getattr(r, k) is None else str(getattr(r, k))


def _col(name: str, k: str) -> Column:
    return (name, _key(k), _str(k))


def _config_cols(a: Analysis) -> list[Column]:
    """A config column only when the run holds several config fingerprints."""
    return [_col("config", "config")] if len(a.configs) > 1 else []


def _cell_cols(a: Analysis) -> list[Column]:
    """A probe cell's key: model, dataset, config (when several), T and perturbation."""
    return [
        _col("model", "model"),
        _col("dataset", "dataset"),
        *_config_cols(a),
        ("T", _key("temperature"), lambda r: temp(r.temperature)),
        _col("perturbation", "perturbation"),
    ]


def _probe_cells(a: Analysis, judge: str | None) -> list[JudgedCell]:
    """The one-turn probe's unperturbed cells of one judge (the paper's tables)."""
    return [
        c
        for c in _for_judge(a.cells, judge)
        if isinstance(c, GenerateCell) and c.perturbation == "none"
    ]


def corrected_text(c: JudgedCell) -> str:
    """The judge-corrected rate with its CI, or why there is none."""
    if c.rate_corrected is None:
        return "–" if c.correction_note is None else f"– ({c.correction_note})"
    mark = " (extrapolated)" if extrapolated(c) else ""
    return rate_ci(c.rate_corrected, c.ci_corrected_low, c.ci_corrected_high) + mark


def extrapolated(c: JudgedCell) -> bool:
    """The card has no reference turns from this cell's dataset or model: its corrected
    rate rests on error rates extrapolated from the spread across the card's strata."""
    return any(v is None for v in (c.correction_strata or {}).values())


def strata_text(c: JudgedCell) -> str:
    """``dataset=gsm8k, model=smollm2-135m`` (``model=? (not in card)`` when uncovered),
    or ``pooled`` when the card had no strata."""
    if not c.correction_strata:
        return "pooled"
    return ", ".join(
        f"{axis}={name if name is not None else '? (not in card)'}"
        for axis, name in c.correction_strata.items()
    )


def strata_used(cells: Iterable[JudgedCell]) -> list[str]:
    """Each distinct set of strata behind the cells' corrected rates, with the error rates
    it gave (``dataset=gsm8k, model=m: se 0.65, sp 0.86``), in cell order."""
    out: dict[str, None] = {}
    for c in cells:
        if c.rate_corrected is None or c.correction_sensitivity is None:
            continue
        sp = c.correction_specificity or 0.0
        out[f"{strata_text(c)}: se {c.correction_sensitivity:.2f}, sp {sp:.2f}"] = None
    return list(out)


def cards_used(cells: Iterable[JudgedCell]) -> list[str]:
    """The judge cards behind the cells' corrected rates, sorted (empty: none has one)."""
    return sorted({c.judge_card for c in cells if c.judge_card})


def _corrected_cols(cells: list[JudgedCell]) -> list[Column]:
    if not cards_used(cells):
        return []
    return [("corrected [95% CI]", _key("rate_corrected"), corrected_text)]


@dataclass(frozen=True)
class _AccCell:
    """A cell with its (model, dataset, config) accuracy row, for Tables 3/5."""

    cell: JudgedCell
    acc: AccuracyRow | None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cell, name)


def accuracy_followup_table(a: Analysis, judge: str | None) -> Table:
    """Tables 3/5: per model × dataset, accuracy and the follow-up rate at the lowest T."""
    acc = {(r.model, r.dataset, r.config): r for r in a.accuracy}
    base = _probe_cells(a, judge)
    lowest: dict[tuple[str, str, str], JudgedCell] = {}
    for c in base:
        k = (c.model, c.dataset, c.config)
        if k not in lowest or (c.temperature or 0) < (lowest[k].temperature or 0):
            lowest[k] = c
    rows = [_AccCell(c, acc.get(k)) for k, c in lowest.items()]
    spec: list[Column] = [
        _col("model", "model"),
        _col("family", "family"),
        _col("dataset", "dataset"),
        *_config_cols(a),
        (
            "accuracy",
            lambda r: r.acc.accuracy if r.acc else None,
            lambda r: rate_ci(r.acc.accuracy, r.acc.ci_low, r.acc.ci_high) if r.acc else "–",
        ),
        _col("answers", "n_answers"),
        ("answers truncated", _key("answers_truncated"), _truncated_text),
        ("T", _key("temperature"), lambda r: temp(r.temperature)),
        ("follow-up", _key("rate"), lambda r: rate_ci(r.rate, r.ci_low, r.ci_high)),
        *_corrected_cols(base),
        *(
            [("strata", lambda r: strata_text(r.cell), lambda r: strata_text(r.cell))]
            if cards_used(base)
            else []
        ),
        _col("n", "n"),
        ("unparseable", _key("failed"), _str("failed")),
    ]
    return _build(
        "accuracy_followup",
        f"Accuracy and follow-up rate (judge {judge}, no perturbation, lowest T)",
        spec,
        rows,
        note="Accuracy: Wilson 95% CI over answers; an answer cut inside its reasoning has no "
        "final answer and counts as incorrect (marked 'in reasoning'). Follow-up: 95% CI "
        "(Wilson, or an item-clustered interval when k > 1)." + _corrected_note(base),
    )


def _truncated_text(c: Any) -> str:
    text = str(c.answers_truncated)
    if c.answers_incomplete_reasoning:
        text += f" ({c.answers_incomplete_reasoning} in reasoning)"
    return text


def _corrected_note(cells: list[JudgedCell]) -> str:
    cards = cards_used(cells)
    if not cards:
        return ""
    return (
        f" Corrected: Rogan–Gladen estimate of the true rate given judge card "
        f"{', '.join(cards)}, with the sensitivity and specificity of the row's strata "
        "(dataset and model, fit jointly and partially pooled across the card's strata). CI over "
        "items, the strata's reference turns and the spread between strata; "
        "'(extrapolated)': the card has no reference turns from that dataset or model."
    )


def temperature_table(a: Analysis, judge: str | None) -> Table:
    """Table 4: follow-up rate per model × dataset (rows) and temperature (columns)."""
    base = _probe_cells(a, judge)
    temps = sorted({c.temperature for c in base if c.temperature is not None})
    grid: dict[tuple[str, str, str], dict[float | None, JudgedCell]] = {}
    for c in base:
        grid.setdefault((c.model, c.dataset, c.config), {})[c.temperature] = c
    several = len(a.configs) > 1
    columns = ["model", "dataset", *(["config"] if several else [])]
    columns += [f"T={temp(t)}" for t in temps] + ["unparseable"]
    rows, shown = [], []
    for (model, dataset, config), by_t in grid.items():
        unp = sum(c.failed for c in by_t.values())
        key = [model, dataset, *([config] if several else [])]
        rows.append([*key, *[by_t[t].rate if t in by_t else None for t in temps], unp])
        shown.append([*key, *[_cell_text(by_t.get(t)) for t in temps], str(unp)])
    return Table(
        "temperature_sweep",
        f"Follow-up rate vs temperature (judge {judge}, no perturbation)",
        columns,
        rows,
        shown,
        note="Each entry: rate [95% CI] (n ok judgments)." + _few_items(base),
    )


FEW_ITEMS = 10


def _few_items(cells: list[JudgedCell]) -> str:
    """A caveat when an item-clustered interval rests on few items."""
    few = [c for c in cells if c.samples > 1 and 0 < c.n_items < FEW_ITEMS]
    if not few:
        return ""
    return (
        f" Caution: {len(few)} interval(s) over k > 1 samples rest on fewer than {FEW_ITEMS} "
        "items; read them as rough."
    )


def _cell_text(c: JudgedCell | None) -> str:
    if c is None:
        return "–"
    return f"{rate_ci(c.rate, c.ci_low, c.ci_high)} (n={c.n})"


def perturbation_table(a: Analysis, judge: str | None) -> Table:
    """The positive controls: rate with each perturbation, its baseline, and the delta."""
    rows = _for_judge(a.deltas, judge)
    spec: list[Column] = [
        *_cell_cols(a),
        ("rate (none)", _key("rate_base"), lambda r: pct(r.rate_base)),
        ("rate (perturbed)", _key("rate"), lambda r: pct(r.rate)),
        ("delta", _key("delta"), lambda r: _signed(r.delta, r.ci_low, r.ci_high)),
        (
            "delta corrected",
            _key("delta_corrected"),
            lambda r: _signed(r.delta_corrected, r.ci_corrected_low, r.ci_corrected_high),
        ),
        _col("items", "n_items"),
        (
            "unparseable",
            lambda r: r.unparseable + r.unparseable_base,
            lambda r: str(r.unparseable + r.unparseable_base),
        ),
    ]
    return _build(
        "perturbations",
        f"Perturbation deltas (judge {judge})",
        spec,
        rows,
        note="delta = rate(perturbed) - rate(none) on the items present in both, "
        "with a paired item-clustered 95% CI (in points). Corrected: the delta over the "
        "judge's se + sp - 1 for the row's strata (raw deltas shrink a true effect by it), "
        "CI over the paired items and the judge's error rates."
        + (
            f" Caution: with fewer than {FEW_ITEMS} items the interval is rough."
            if any(0 < r.n_items < FEW_ITEMS for r in rows)
            else ""
        ),
    )


def _signed(d: float | None, lo: float | None, hi: float | None) -> str:
    if d is None:
        return "–"
    text = f"{100 * d:+.1f}"
    if lo is not None and hi is not None:
        text += f" [{100 * lo:+.1f}, {100 * hi:+.1f}]"
    return text


def failure_table(a: Analysis, judge: str | None, by: str = "family") -> Table:
    """Failure-mode shares (of all ok judgments) per family or model, one column per label."""
    rows = _for_judge(a.labels_by_family if by == "family" else a.labels_by_model, judge)
    several = len(a.configs) > 1
    columns = [by, *(["config"] if several else []), *LABELS, "n", "unparseable"]
    raw, shown = [], []
    for r in rows:
        shares = [r.shares.get(lab) for lab in LABELS]
        unp = r.unparseable + r.errors
        key = [r.group, *([r.config] if several else [])]
        raw.append([*key, *[s or 0.0 for s in shares], r.n, unp])
        shown.append([*map(str, key), *[pct(s or 0.0) for s in shares], str(r.n), str(unp)])
    return Table(
        f"failure_modes_{by}",
        f"Label shares per {by} (judge {judge}, all cells)",
        columns,
        raw,
        shown,
        note="Shares of judgments with status ok; unparseable ones are counted "
        "apart, not as a label.",
    )


def correlation_table(a: Analysis, judge: str | None) -> Table:
    rows = _for_judge(a.correlations, judge)
    spec: list[Column] = [
        ("T", _key("temperature"), lambda r: temp(r.temperature)),
        *_config_cols(a),
        _col("scope", "scope"),
        _col("points", "n_points"),
        ("Pearson r", _key("pearson_r"), lambda r: _f(r.pearson_r, r.pearson_p)),
        ("Spearman rho", _key("spearman_rho"), lambda r: _f(r.spearman_rho, r.spearman_p)),
        (
            "rho 95% CI",
            _key("rho_ci_low"),
            lambda r: (
                "–" if r.rho_ci_low is None else f"[{r.rho_ci_low:+.2f}, {r.rho_ci_high:+.2f}]"
            ),
        ),
        _col("equivalence", "equivalence"),
        _col("note", "note"),
    ]
    return _build(
        "correlation",
        f"Accuracy vs follow-up across models (judge {judge})",
        spec,
        rows,
        note="Per dataset, never pooled across datasets. Points are models; scope "
        "'items: D': (model, item) pairs, item correct (0/1) vs its follow-up rate. "
        "p-values in parentheses. rho 95% CI: bootstrap over models and their items. "
        "Equivalence: |rho| < 0.3 shown with 95% confidence when the 90% CI lies inside "
        "±0.3 (two one-sided tests), else 'not shown'.",
    )


def _f(x: float | None, p: float | None) -> str:
    return "–" if x is None else f"{x:.3f} (p={p:.3g})" if p is not None else f"{x:.3f}"


def sampling_table(a: Analysis, judge: str | None) -> Table:
    """Awareness under sampling: GF@k (at least one genuine turn among k samples) and how
    the genuine turns spread over items (never / sometimes / always)."""
    cells = [
        c
        for c in _for_judge(a.cells, judge)
        if isinstance(c, GenerateCell) and c.gf_at_k and c.samples > 1
    ]
    ks = sorted({k for c in cells for k in c.gf_at_k or {}})
    spec: list[Column] = [
        *_cell_cols(a),
        *[_gf_col(k) for k in ks],
        *_gf_corrected_cols(ks[-1] if ks else 0),
        ("items never", _key("items_never"), lambda r: pct(r.items_never)),
        _spread_corrected_col("never"),
        ("never (null)", _key("items_never_null"), lambda r: pct(r.items_never_null)),
        ("sometimes", _key("items_sometimes"), lambda r: pct(r.items_sometimes)),
        _spread_corrected_col("sometimes"),
        ("always", _key("items_always"), lambda r: pct(r.items_always)),
        _spread_corrected_col("always"),
        ("always (null)", _key("items_always_null"), lambda r: pct(r.items_always_null)),
        _col("items", "n_items"),
    ]
    return _build(
        "sampling",
        f"Genuine follow-ups under sampling (judge {judge}, cells with k > 1)",
        spec,
        cells,
        note="GF@k: the unbiased estimate that at least one of k samples of a context is "
        "genuine (pass@k's estimator over the n samples per item), as judged. Corrected: "
        "through the judge's error rates for the row's strata, CI over items and those "
        "rates. Null: what a judge with these error rates reports when no turn is genuine "
        "(1 - sp^k); a judged value near it is no evidence of genuine follow-ups. Items "
        "never / sometimes / always: shares of items whose samples were all degenerate, "
        "mixed, all genuine, each corrected the same way (what a judge that never errs "
        "would report on these items and samples), beside the null shares.",
    )


def _spread_corrected_col(share: str) -> Column:
    """One corrected share of the item spread (``items_<share>_corrected``) with its CI."""
    name = f"items_{share}_corrected"

    def shown(r: JudgedCell) -> str:
        low, high = getattr(r, f"{name}_ci_low"), getattr(r, f"{name}_ci_high")
        return rate_ci(getattr(r, name), low, high) if low is not None else "–"

    return (f"{share} corrected", _key(name), shown)


def _gf_corrected_cols(k: int) -> list[Column]:
    if not k:
        return []

    def corrected(r: JudgedCell) -> str:
        value = (r.gf_at_k_corrected or {}).get(k)
        ci = (r.gf_at_k_corrected_ci or {}).get(k)
        return "–" if value is None or ci is None else rate_ci(value, ci[0], ci[1])

    return [
        (f"GF@{k} corrected", lambda r: (r.gf_at_k_corrected or {}).get(k), corrected),
        (
            f"GF@{k} null",
            lambda r: (r.gf_at_k_null or {}).get(k),
            lambda r: pct((r.gf_at_k_null or {}).get(k)),
        ),
    ]


def _gf_col(k: int) -> Column:
    return (f"GF@{k}", lambda r: (r.gf_at_k or {}).get(k), lambda r: pct((r.gf_at_k or {}).get(k)))


def likelihood_table(a: Analysis) -> Table:
    """The judge-free likelihood probe: answer PMI and role contrast of the real next turn
    (version 2), with the old ranking as a secondary column."""
    cells = [c for c in a.cells if isinstance(c, LikelihoodCell)]
    spec: list[Column] = [
        _col("model", "model"),
        _col("dataset", "dataset"),
        *_config_cols(a),
        _col("perturbation", "perturbation"),
        _col("contexts", "n"),
        _col("left out (copies)", "likelihood_excluded"),
        *LIKELIHOOD_MEASURE_COLUMNS,
        (
            "ranking: real preferred [95% CI]",
            _key("preference_accuracy"),
            lambda r: rate_ci(r.preference_accuracy, r.preference_ci_low, r.preference_ci_high),
        ),
    ]
    return _build(
        "likelihood",
        "Likelihood probe: the real next user turn under the real answer and the user role",
        spec,
        cells,
        note=LIKELIHOOD_NOTE,
    )


LIKELIHOOD_NOTE = (
    "Answer PMI: log p(real turn | real answer) minus its mean under 3 counterfactual "
    "answers (the same answer truncated or with an injected error, other items' answers); "
    "share > 0 (Wilson CI) and, beside it, the same share for an unrelated request and the "
    "difference (paired bootstrap CI). Role contrast: log p(real turn | user header) minus "
    "log p(real turn | the template's assistant header); share > 0, mean in nats, and AUC "
    "against the answer's opening (bootstrap CI over contexts). Ranking (secondary): the "
    "real turn beats the copies and the unrelated request by mean per-token log-likelihood; "
    "it measures how easy a text is to copy. Left out: reference turns equal to a context "
    "turn. Version 1 runs show only the ranking."
)


def _nats(x: float | None, lo: float | None, hi: float | None) -> str:
    if x is None:
        return "–"
    if lo is None or hi is None:
        return f"{x:+.2f}"
    return f"{x:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def _auc(x: float | None, lo: float | None, hi: float | None) -> str:
    if x is None:
        return "–"
    return f"{x:.2f}" if lo is None or hi is None else f"{x:.2f} [{lo:.2f}, {hi:.2f}]"


def _ci_of(fmt: Callable[..., str], name: str) -> Callable[[Any], str]:
    return lambda r: fmt(
        getattr(r, name), getattr(r, f"{name}_ci_low"), getattr(r, f"{name}_ci_high")
    )


LIKELIHOOD_MEASURE_COLUMNS: list[Column] = [
    ("PMI > 0 [95% CI]", _key("pmi_share"), _ci_of(rate_ci, "pmi_share")),
    ("control PMI > 0", _key("pmi_control_share"), lambda r: pct(r.pmi_control_share)),
    (
        "PMI > 0, real - control",
        _key("pmi_excess_share"),
        _ci_of(lambda x, lo, hi: _signed(x, lo, hi), "pmi_excess_share"),
    ),
    ("PMI mean, nats", _key("pmi_mean"), _ci_of(_nats, "pmi_mean")),
    ("role > 0 [95% CI]", _key("role_share"), _ci_of(rate_ci, "role_share")),
    ("role mean, nats", _key("role_mean"), _ci_of(_nats, "role_mean")),
    ("role AUC vs opening", _key("role_auc"), _ci_of(_auc, "role_auc")),
]
"""The version 2 measures as columns (the CLI's table prints the same ones)."""


def rollout_table(a: Analysis, judge: str | None) -> Table:
    """Rollouts turn by turn: the genuine rate at turn t and the share of conversations
    whose turns 1..t were all genuine (survival)."""
    cells = sorted(
        (c for c in _for_judge(a.cells, judge) if isinstance(c, RolloutCell)),
        key=lambda c: (c.model, c.dataset, c.config, c.temperature or 0, c.turn or 0),
    )
    spec: list[Column] = [
        _col("model", "model"),
        _col("dataset", "dataset"),
        *_config_cols(a),
        ("T", _key("temperature"), lambda r: temp(r.temperature)),
        _col("turn", "turn"),
        _col("n", "n"),
        ("genuine rate [95% CI]", _key("rate"), lambda r: rate_ci(r.rate, r.ci_low, r.ci_high)),
        (
            "survival [95% CI]",
            _key("survival"),
            lambda r: rate_ci(r.survival, r.survival_ci_low, r.survival_ci_high),
        ),
        ("survival null", _key("survival_null"), lambda r: pct(r.survival_null)),
        ("selected by", _key("selected_by"), lambda r: r.selected_by or "–"),
        ("unparseable", _key("failed"), _str("failed")),
    ]
    return _build(
        "rollout",
        f"Rollouts per turn (judge {judge})",
        spec,
        cells,
        note="Survival at turn t: conversations whose user turns 1..t were all genuine, over "
        "conversations whose state at t is known (a turn not judged ok leaves it unknown). "
        "Intervals are clustered by item. Survival null: (1 - sp)^t, what a judge with these "
        "error rates reports when no turn is genuine. Selected by: best-of turns chosen by "
        "that judge; their cells are not corrected, and the selector's own are biased up.",
    )


def challenge_table(a: Analysis, judge: str | None) -> Table:
    """How often user turns dispute the answer, perturbed vs the same items' clean answer."""
    rows = [r for r in _for_judge(a.deltas, judge) if r.challenge_rate is not None]
    spec: list[Column] = [
        *_cell_cols(a),
        _col("items (paired)", "challenge_items"),
        ("challenges (none)", _key("challenge_rate_base"), lambda r: pct(r.challenge_rate_base)),
        ("challenges (perturbed)", _key("challenge_rate"), lambda r: pct(r.challenge_rate)),
        ("delta [95% CI]", _key("challenge_delta"), _ci_of(_signed, "challenge_delta")),
        (
            "delta, clean answer correct",
            _key("challenge_delta_correct"),
            _ci_of(_signed, "challenge_delta_correct"),
        ),
        (
            "delta, clean answer wrong",
            _key("challenge_delta_incorrect"),
            _ci_of(_signed, "challenge_delta_incorrect"),
        ),
    ]
    return _build(
        "challenges",
        f"User turns that dispute the answer (judge {judge})",
        spec,
        rows,
        note="Paired by item: each item's share of challenging turns with the perturbation "
        "(inject-error: a wrong final answer) minus the same item's share with its clean "
        "answer, averaged over the items that have both (bootstrap CI over items), and split "
        "by whether the clean answer was correct. Points are percentage points. An "
        "interaction-aware model challenges an injected error more often.",
    )


def temperature_delta_table(a: Analysis, judge: str | None) -> Table:
    """T vs T=0 on the same items: the temperature curve as paired differences."""
    rows = _for_judge(a.temperature_deltas, judge)
    spec: list[Column] = [
        _col("model", "model"),
        _col("dataset", "dataset"),
        *_config_cols(a),
        ("T", _key("temperature"), lambda r: temp(r.temperature)),
        ("rate (T=0)", _key("rate_base"), lambda r: pct(r.rate_base)),
        ("rate (T)", _key("rate"), lambda r: pct(r.rate)),
        ("delta", _key("delta"), lambda r: _signed(r.delta, r.ci_low, r.ci_high)),
        (
            "delta corrected",
            _key("delta_corrected"),
            lambda r: _signed(r.delta_corrected, r.ci_corrected_low, r.ci_corrected_high),
        ),
        _col("items", "n_items"),
    ]
    return _build(
        "temperature_deltas",
        f"Follow-up rate at T minus T=0 on the same items (judge {judge})",
        spec,
        rows,
        note="Paired by item (answers are shared across temperatures), 95% CI in points; "
        "corrected: over the judge's se + sp - 1 for the row's strata.",
    )


def all_tables(a: Analysis, judge: str | None) -> list[Table]:
    return [
        accuracy_followup_table(a, judge),
        temperature_table(a, judge),
        temperature_delta_table(a, judge),
        perturbation_table(a, judge),
        failure_table(a, judge, "family"),
        failure_table(a, judge, "model"),
        correlation_table(a, judge),
        sampling_table(a, judge),
        likelihood_table(a),
        rollout_table(a, judge),
        challenge_table(a, judge),
    ]
