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
from typing import Any

from userturn.analysis.views import Analysis
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
        writer.writerow(self.columns)
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


def _for_judge(rows: Iterable[dict[str, Any]], judge: str | None) -> list[dict[str, Any]]:
    return [r for r in rows if r.get("judge") == judge]


def _build(
    name: str,
    title: str,
    spec: list[tuple[str, Callable[[dict[str, Any]], Any], Callable[[dict[str, Any]], str]]],
    rows: list[dict[str, Any]],
    note: str = "",
) -> Table:
    return Table(
        name=name,
        title=title,
        columns=[s[0] for s in spec],
        rows=[[raw(r) for _, raw, _ in spec] for r in rows],
        shown=[[fmt(r) for _, _, fmt in spec] for r in rows],
        note=note,
    )


def _key(k: str) -> Callable[[dict[str, Any]], Any]:
    return lambda r: r.get(k)


def _str(k: str) -> Callable[[dict[str, Any]], str]:
    return lambda r: "–" if r.get(k) is None else str(r.get(k))


def accuracy_followup_table(a: Analysis, judge: str | None) -> Table:
    """Tables 3/5: per model × dataset, accuracy and the follow-up rate at the lowest T."""
    acc = {(r["model"], r["dataset"]): r for r in a.accuracy}
    base = [c for c in _for_judge(a.cells, judge) if c["perturbation"] == "none"]
    lowest: dict[tuple[str, str], dict[str, Any]] = {}
    for c in base:
        k = (c["model"], c["dataset"])
        if k not in lowest or (c["temperature"] or 0) < (lowest[k]["temperature"] or 0):
            lowest[k] = c
    rows = [{**c, "acc": acc.get(k, {})} for k, c in lowest.items()]
    spec = [
        ("model", _key("model"), _str("model")),
        ("family", _key("family"), _str("family")),
        ("dataset", _key("dataset"), _str("dataset")),
        (
            "accuracy",
            lambda r: r["acc"].get("accuracy"),
            lambda r: rate_ci(
                r["acc"].get("accuracy"), r["acc"].get("ci_low"), r["acc"].get("ci_high")
            ),
        ),
        (
            "answers",
            lambda r: r["acc"].get("n_answers"),
            lambda r: str(r["acc"].get("n_answers", "–")),
        ),
        ("answers truncated", _key("answers_truncated"), _str("answers_truncated")),
        ("T", _key("temperature"), lambda r: temp(r["temperature"])),
        ("follow-up", _key("rate"), lambda r: rate_ci(r["rate"], r["ci_low"], r["ci_high"])),
        ("n", _key("n"), _str("n")),
        ("unparseable", _unp, lambda r: str(_unp(r))),
    ]
    return _build(
        "accuracy_followup",
        f"Accuracy and follow-up rate (judge {judge}, no perturbation, lowest T)",
        spec,
        rows,
        note="Accuracy: Wilson 95% CI over answers. Follow-up: 95% CI "
        "(Wilson, or cluster bootstrap by item when k > 1).",
    )


def _unp(r: dict[str, Any]) -> int:
    return int(r.get("unparseable") or 0) + int(r.get("errors") or 0)


def temperature_table(a: Analysis, judge: str | None) -> Table:
    """Table 4: follow-up rate per model × dataset (rows) and temperature (columns)."""
    base = [c for c in _for_judge(a.cells, judge) if c["perturbation"] == "none"]
    temps = sorted({c["temperature"] for c in base if c["temperature"] is not None})
    grid: dict[tuple[str, str], dict[float, dict[str, Any]]] = {}
    for c in base:
        grid.setdefault((c["model"], c["dataset"]), {})[c["temperature"]] = c
    columns = ["model", "dataset"] + [f"T={temp(t)}" for t in temps] + ["unparseable"]
    rows, shown = [], []
    for (model, dataset), by_t in grid.items():
        unp = sum(_unp(c) for c in by_t.values())
        rows.append([model, dataset, *[by_t[t]["rate"] if t in by_t else None for t in temps], unp])
        shown.append([model, dataset, *[_cell_text(by_t.get(t)) for t in temps], str(unp)])
    return Table(
        "temperature_sweep",
        f"Follow-up rate vs temperature (judge {judge}, no perturbation)",
        columns,
        rows,
        shown,
        note="Each entry: rate [95% CI] (n ok judgments)." + _few_items(base),
    )


FEW_ITEMS = 10


def _few_items(cells: list[dict[str, Any]]) -> str:
    """A caveat when a cluster bootstrap rests on too few items to be trusted."""
    few = [
        c
        for c in cells
        if c.get("ci_method") == "cluster-bootstrap" and 0 < int(c.get("n_items") or 0) < FEW_ITEMS
    ]
    if not few:
        return ""
    return (
        f" Caution: {len(few)} bootstrap interval(s) rest on fewer than {FEW_ITEMS} "
        "items and understate the uncertainty (they can even have zero width)."
    )


def _cell_text(c: dict[str, Any] | None) -> str:
    if c is None:
        return "–"
    return f"{rate_ci(c['rate'], c['ci_low'], c['ci_high'])} (n={c['n']})"


def perturbation_table(a: Analysis, judge: str | None) -> Table:
    """The positive controls: rate with each perturbation, its baseline, and the delta."""
    rows = _for_judge(a.deltas, judge)
    spec = [
        ("model", _key("model"), _str("model")),
        ("dataset", _key("dataset"), _str("dataset")),
        ("T", _key("temperature"), lambda r: temp(r["temperature"])),
        ("perturbation", _key("perturbation"), _str("perturbation")),
        ("rate (none)", _key("rate_base"), lambda r: pct(r["rate_base"])),
        ("rate (perturbed)", _key("rate"), lambda r: pct(r["rate"])),
        ("delta", _key("delta"), lambda r: _signed(r["delta"], r["ci_low"], r["ci_high"])),
        ("items", _key("n_items"), _str("n_items")),
        (
            "unparseable",
            lambda r: r["unparseable"] + r["unparseable_base"],
            lambda r: str(r["unparseable"] + r["unparseable_base"]),
        ),
    ]
    return _build(
        "perturbations",
        f"Perturbation deltas (judge {judge})",
        spec,
        rows,
        note="delta = rate(perturbed) - rate(none) on the items present in both, "
        "with a paired cluster-bootstrap 95% CI over items (in points)."
        + (
            f" Caution: with fewer than {FEW_ITEMS} items the interval understates the uncertainty."
            if any(0 < r["n_items"] < FEW_ITEMS for r in rows)
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
    columns = [by, *LABELS, "n", "unparseable"]
    raw, shown = [], []
    for r in rows:
        shares = [r["shares"].get(lab) for lab in LABELS]
        unp = r["unparseable"] + r["errors"]
        raw.append([r[by], *[s or 0.0 for s in shares], r["n"], unp])
        shown.append([str(r[by]), *[pct(s or 0.0) for s in shares], str(r["n"]), str(unp)])
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
    spec = [
        ("T", _key("temperature"), lambda r: temp(r["temperature"])),
        ("scope", _key("scope"), _str("scope")),
        ("points", _key("n_points"), _str("n_points")),
        ("Pearson r", _key("pearson_r"), lambda r: _f(r["pearson_r"], r["pearson_p"])),
        ("Spearman rho", _key("spearman_rho"), lambda r: _f(r["spearman_rho"], r["spearman_p"])),
        ("note", _key("note"), _str("note")),
    ]
    return _build(
        "correlation",
        f"Accuracy vs follow-up across models (judge {judge})",
        spec,
        rows,
        note="Points are (model, dataset) pairs; scope 'items': (model, item) "
        "pairs, item correct (0/1) vs its follow-up rate. p-values in "
        "parentheses.",
    )


def _f(x: float | None, p: float | None) -> str:
    return "–" if x is None else f"{x:.3f} (p={p:.3g})" if p is not None else f"{x:.3f}"


def all_tables(a: Analysis, judge: str | None) -> list[Table]:
    return [
        accuracy_followup_table(a, judge),
        temperature_table(a, judge),
        perturbation_table(a, judge),
        failure_table(a, judge, "family"),
        failure_table(a, judge, "model"),
        correlation_table(a, judge),
    ]
