"""The report machinery on its own (what the XGBoost report will reuse): escaping by default,
tables, nested details, and plots whose size does not grow with the length of the data."""
from __future__ import annotations

import re

import numpy as np

from sdlocal.evaluator.reports import Html, Page, Section, escape, note, plots, structured, table, tag
from tests.evaluator.reports._html import parse_page


def test_tag_escapes_text_and_attributes_but_keeps_markup() -> None:
    assert tag("td", "<b>&", title='"q" <x>', class_="a b", hidden=True, data_x=None) == (
        '<td title="&quot;q&quot; &lt;x&gt;" class="a b" hidden>&lt;b&gt;&amp;</td>')
    assert tag("p", Html("<em>ok</em>"), " & more") == "<p><em>ok</em> &amp; more</p>"
    assert escape(Html("<i>")) == "<i>" and escape("<i>") == "&lt;i&gt;"


def test_table_formats_numbers_and_marks_rows() -> None:
    html = table(["name", "n", "x"], [["<a>", 12345, 0.000123456], ["b", None, float("nan")]],
                 numeric=(1, 2), row_classes=["issue", None], caption="T")
    page = parse_page(html.replace("<table>", '<table class="t">'))
    assert page.tables["t"] == [["<a>", "12,345", "0.000123"], ["b", "–", "–"]]
    assert page.row_classes["t"] == ["issue", ""]
    assert '<td class="num">12,345</td>' in html and "<caption>T</caption>" in html


def test_structured_details_nest_summarize_and_escape() -> None:
    html = structured({
        "per node": {"algo-1": {"p50": 1.5, "p95": 9}, "algo-2": {"p50": 2, "p95": 8}},
        "samples": list(range(1000)),
        "names": ["a", "b"],
        "<script>": {"deep": {"deeper": {"deepest": [1, 2]}}},
    })
    page = parse_page(html)
    assert "1,000 values, from 0 to 999" in page.text and "a, b" in page.text
    assert "script" not in page.tags and "<script>" in page.text
    grid = structured({"algo-1": {"p50": 1.5, "p95": 9}, "algo-2": {"p50": 2, "p95": 8}})
    assert parse_page(grid).tables["stats details"] == [["algo-1", "1.5", "9"], ["algo-2", "2", "8"]]
    assert grid in html  # the same table, nested under its key
    assert '{"deepest": [1, 2]}' in page.text  # past the depth limit: shown as JSON text


def test_envelope_keeps_the_peaks_of_a_long_series() -> None:
    x = np.arange(200_000, dtype=float)
    y = np.zeros_like(x)
    y[123_457], y[7] = 99.0, -5.0
    rx, ry = plots.envelope(x, y)
    assert rx.size <= plots.MAX_POINTS + 2 and np.all(np.diff(rx) > 0)
    assert ry.max() == 99.0 and ry.min() == -5.0 and 123_457.0 in rx
    short = np.arange(10.0)
    assert plots.envelope(short, short)[0].tolist() == short.tolist()


def test_a_line_breaks_where_data_is_missing() -> None:
    x = np.concatenate([np.arange(100.0), np.arange(1000.0, 1100.0)])
    px, py = plots.line_points(x, np.ones_like(x))
    assert np.isnan(px).sum() == 1 and np.isnan(py).sum() == 1
    assert px[np.flatnonzero(np.isnan(px))[0] - 1] == 99.0
    px, _ = plots.line_points(np.arange(50.0), np.ones(50))
    assert not np.isnan(px).any()


def _chart(n: int, kind: str = "line") -> str:
    rng = np.random.default_rng(1)
    x = np.linspace(0, 60, n)
    return plots.line_chart([plots.Line(x, rng.normal(50, 10, n), "cpu", kind=kind)], title="t",
                            xlabel="min", ylabel="%")


def test_plot_size_does_not_grow_with_the_length_of_the_data() -> None:
    small, large = _chart(2_000), _chart(500_000)
    assert len(large) < 1.3 * len(small) and len(large) < 120_000
    # many points as markers are embedded as one PNG inside the SVG, few are drawn as vectors
    many = _chart(20_000, kind="points")
    assert "data:image/png;base64," in many and len(many) < 200_000
    assert "data:image/png" not in _chart(200, kind="points")


def test_plots_are_inline_svg_with_unique_ids_and_a_label() -> None:
    a, b = _chart(100), _chart(100, kind="points")
    for svg in (a, b):
        assert svg.startswith('<figure class="plot"><svg role="img" aria-label="t"')
        assert "<?xml" not in svg and "<!DOCTYPE" not in svg
    ids_a = set(re.findall(r'\bid="([^"]+)"', a))
    ids_b = set(re.findall(r'\bid="([^"]+)"', b))
    assert ids_a and not ids_a & ids_b
    for ref in re.findall(r'(?:href="#|url\(#)([^")]+)', a):
        assert ref in ids_a  # every reference points at an id of the same figure


def test_the_parts_an_xgboost_report_needs() -> None:
    confusion = plots.heatmap([[50, 2], [7, 41]], title="Confusion matrix", row_labels=["cat", "dog"],
                              col_labels=["cat", "dog"], xlabel="predicted", ylabel="label", annotate=True,
                              cmap="Blues")
    importance = plots.bar_chart(["f0", "leaky_feature", "f2"], [0.1, 0.8, 0.05], title="Feature importance",
                                 xlabel="gain")
    hist = plots.histogram([("labels", [0, 1, 1, 0]), ("predictions", [0.1, 0.9, 0.7, 0.2])],
                           title="Distribution", xlabel="value", bins=10)
    html = Page("XGBoost report", [Section("Confusion", confusion, id="c"), Section("Features", importance, id="f"),
                                   Section("Labels", Html(hist + note("ok", "ok")), id="l")]).render()
    page = parse_page(html)
    assert page.figure_titles == ["Confusion matrix", "Feature importance", "Distribution"]
    assert {"50", "41", "leaky_feature", "predictions"} <= set(page.text.split())
    assert [u[2] for u in page.urls if u[0] == "a"] == ["#c", "#f", "#l"]  # the contents, to the sections
