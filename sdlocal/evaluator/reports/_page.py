"""A report page: one self-contained HTML file of sections, tables, notes and inline SVG figures.

Escaping is the default: every value put into the page is escaped unless it is `Html` (markup
built by this module or by `_plots`), so a rule name, a rule's details or a tensor name from a
user's job can never inject markup. The page carries a Content-Security-Policy that allows no
script and no network load at all (images only as `data:` URIs, styles only inline): it opens
offline, and a browser refuses anything a future change might try to fetch.
"""
from __future__ import annotations

import html
import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

# default-src 'none' covers scripts, frames, fonts, connections; data: images are what matplotlib
# embeds for rasterized artists inside its SVG.
CONTENT_SECURITY_POLICY = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


class Html(str):
    """Markup that is already safe: inserted as is. Everything else is escaped."""

    __slots__ = ()


def escape(value: object) -> Html:
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def join(parts: Iterable[object], sep: str = "") -> Html:
    return Html(escape(sep).join(escape(p) for p in parts))


def tag(name: str, *children: object, **attrs: object) -> Html:
    """<name attrs>children</name>; `class_` gives `class`, `aria_label` gives `aria-label`; an
    attribute that is None or False is left out, True is written bare."""
    out = [f"<{name}"]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        attr = key.rstrip("_").replace("_", "-")
        out.append(f" {attr}" if value is True else f' {attr}="{escape(value)}"')
    out.append(">")
    out.extend(escape(c) for c in children)
    out.append(f"</{name}>")
    return Html("".join(out))


def fmt_number(value: object, digits: int = 3) -> str:
    """A number as a person reads it: integers with thousands separators, floats with `digits`
    significant digits; anything else as text."""
    if isinstance(value, bool) or not isinstance(value, numbers.Number):
        return str(value)
    if isinstance(value, numbers.Integral):
        return f"{int(value):,}"
    x = float(value)  # type: ignore[arg-type]
    if math.isnan(x):
        return "–"
    if math.isinf(x):
        return "∞" if x > 0 else "-∞"
    if x == int(x) and abs(x) < 1e15:
        return f"{int(x):,}"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def cell(value: object) -> Html:
    """A table cell's content: numbers formatted, None as a dash, markup kept, text escaped."""
    if value is None:
        return Html('<span class="muted">–</span>')
    if isinstance(value, Html):
        return value
    return escape(fmt_number(value))


def table(header: Sequence[str], rows: Iterable[Sequence[object]], *, caption: str | None = None,
          class_: str | None = None, row_classes: Sequence[str | None] | None = None,
          numeric: Sequence[int] = ()) -> Html:
    """A table; `numeric` lists the columns aligned right (figures), `row_classes` a class per row."""
    head = tag("tr", *(tag("th", h, class_="num" if i in numeric else None) for i, h in enumerate(header)))
    body = []
    for r, row in enumerate(rows):
        cls = row_classes[r] if row_classes is not None and r < len(row_classes) else None
        cells = (tag("td", cell(v), class_="num" if i in numeric else None) for i, v in enumerate(row))
        body.append(tag("tr", *cells, class_=cls))
    parts: list[object] = [tag("caption", caption)] if caption else []
    parts += [tag("thead", head), tag("tbody", *body)]
    return tag("table", *parts, class_=class_)


def key_values(items: Mapping[str, object] | Sequence[tuple[str, object]], *, class_: str = "kv") -> Html:
    """A two-column table of names and values."""
    pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
    rows = (tag("tr", tag("th", k, scope="row"), tag("td", cell(v))) for k, v in pairs)
    return tag("table", tag("tbody", *rows), class_=class_)


def paragraph(*children: object, class_: str | None = None) -> Html:
    return tag("p", *children, class_=class_)


def note(text: object, kind: str = "info") -> Html:
    """A boxed remark: kind "info", "warn" or "ok"."""
    return tag("div", text, class_=f"note {kind}")


def badge(text: str, kind: str) -> Html:
    """A small coloured label: kind "issue", "ok", "info" or "error"."""
    return tag("span", text, class_=f"badge {kind}")


def figure(svg: Html, caption: str | None = None) -> Html:
    return tag("figure", svg, tag("figcaption", caption) if caption else Html(""), class_="plot")


def cards(items: Sequence[tuple[str, str]]) -> Html:
    """Headline figures as a row of cards: (label, value)."""
    return tag("div", *(tag("div", tag("div", v, class_="value"), tag("div", k, class_="label"), class_="card")
                        for k, v in items), class_="cards")


@dataclass(frozen=True)
class Section:
    title: str
    body: Html
    id: str = ""
    lead: str = ""  # one sentence under the title that says what the section shows

    def render(self, level: int = 2) -> Html:
        lead = paragraph(self.lead, class_="lead") if self.lead else Html("")
        return tag("section", tag(f"h{level}", self.title), lead, self.body, id=self.id or None)


@dataclass(frozen=True)
class Page:
    title: str
    sections: Sequence[Section]
    subtitle: str = ""
    header: Html = Html("")  # under the title, before the contents (status, headline figures)
    footer: str = ""
    meta: Mapping[str, str] = field(default_factory=dict)  # <meta name=... content=...>

    def render(self) -> str:
        nav_items = [tag("li", tag("a", s.title, href=f"#{s.id}")) for s in self.sections if s.id]
        nav = tag("nav", tag("ol", *nav_items), aria_label="Contents") if len(nav_items) > 1 else Html("")
        metas = join(Html(f'<meta name="{escape(k)}" content="{escape(v)}">') for k, v in self.meta.items())
        head = Html(
            '<meta charset="utf-8">'
            f'<meta http-equiv="Content-Security-Policy" content="{escape(CONTENT_SECURITY_POLICY)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"{metas}{tag('title', self.title)}<style>{STYLE}</style>")
        top = tag("header", tag("h1", self.title),
                  paragraph(self.subtitle, class_="subtitle") if self.subtitle else Html(""), self.header)
        main = tag("main", *(s.render() for s in self.sections))
        foot = tag("footer", self.footer) if self.footer else Html("")
        return f'<!DOCTYPE html>\n<html lang="en"><head>{head}</head><body>{top}{nav}{main}{foot}</body></html>\n'


# Kept plain: system fonts, no web fonts (nothing to fetch), print-friendly, no viewport units
# (a headless screenshot and a browser window lay the page out the same way).
STYLE = """
:root{--fg:#1f2328;--muted:#656d76;--line:#d0d7de;--bg-soft:#f6f8fa;--issue:#cf222e;--issue-bg:#ffebe9;
--ok:#1a7f37;--ok-bg:#dafbe1;--info:#0969da;--info-bg:#ddf4ff;--warn:#9a6700;--warn-bg:#fff8c5}
*{box-sizing:border-box}
body{margin:0 auto;padding:24px 32px 48px;max-width:1180px;color:var(--fg);background:#fff;
font:14px/1.5 "DejaVu Sans","Liberation Sans",Arial,Helvetica,sans-serif}
h1{font-size:26px;margin:0 0 4px}h2{font-size:20px;margin:36px 0 8px;padding-bottom:4px;border-bottom:1px solid var(--line)}
h3{font-size:16px;margin:24px 0 6px}
.subtitle{color:var(--muted);margin:0 0 12px}.lead{color:var(--muted);margin:0 0 12px}.muted{color:var(--muted)}
nav ol{margin:12px 0 0;padding:8px 16px 8px 32px;background:var(--bg-soft);border:1px solid var(--line);border-radius:6px;
columns:3}
nav a{color:var(--info);text-decoration:none}
table{border-collapse:collapse;margin:8px 0 16px;width:100%}
caption{text-align:left;font-weight:bold;padding:4px 0}
th,td{border:1px solid var(--line);padding:5px 8px;text-align:left;vertical-align:top}
thead th{background:var(--bg-soft)}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv{width:auto;min-width:420px}table.kv th{background:var(--bg-soft);font-weight:normal;white-space:nowrap}
table.kv table.kv{margin:0;min-width:0}
tr.issue td:first-child{border-left:4px solid var(--issue)}tr.ok td:first-child{border-left:4px solid var(--ok)}
tr.error td:first-child{border-left:4px solid var(--warn)}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:bold;white-space:nowrap}
.badge.issue{background:var(--issue);color:#fff}.badge.ok{background:var(--ok);color:#fff}
.badge.info{background:var(--info-bg);color:var(--info)}.badge.error{background:var(--warn-bg);color:var(--warn)}
.note{padding:8px 12px;border-radius:6px;margin:8px 0 16px;border:1px solid}
.note.info{background:var(--info-bg);border-color:#54aeff}.note.warn{background:var(--warn-bg);border-color:#d4a72c}
.note.ok{background:var(--ok-bg);border-color:#4ac26b}
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0}
.card{flex:1 1 150px;border:1px solid var(--line);border-radius:6px;padding:10px 14px;background:var(--bg-soft)}
.card .value{font-size:20px;font-weight:bold}.card .label{color:var(--muted);font-size:12px}
figure.plot{margin:8px 0 20px;border:1px solid var(--line);border-radius:6px;padding:8px}
figure.plot svg{display:block;width:100%;height:auto}
figcaption{color:var(--muted);font-size:13px;padding:4px 4px 0}
.rule{border:1px solid var(--line);border-radius:6px;padding:4px 16px 8px;margin:12px 0}
.rule h3{margin-top:12px}.rule .what{margin:4px 0}
.rule .todo{margin:8px 0 4px;padding:6px 10px;background:var(--issue-bg);border-left:4px solid var(--issue);border-radius:4px}
table.stats{width:auto;min-width:640px}
code{font-family:"DejaVu Sans Mono",monospace;font-size:12px;background:var(--bg-soft);padding:0 3px;border-radius:3px}
.wrap{overflow-wrap:anywhere}
footer{margin-top:40px;color:var(--muted);font-size:12px;border-top:1px solid var(--line);padding-top:8px}
@media print{nav{display:none}figure.plot,.rule,table{break-inside:avoid}}
"""


def structured(value: object, *, depth: int = 0, max_depth: int = 3, max_items: int = 40) -> Html:
    """Any JSON-like value (a rule's Details) as nested name/value tables: mappings as tables, short
    lists of scalars inline, long numeric lists summarized, the rest as text; all of it escaped."""
    if isinstance(value, Mapping):
        if not value:
            return Html('<span class="muted">(empty)</span>')
        if depth >= max_depth:
            return tag("span", _short(value), class_="wrap")
        items = list(value.items())
        grid = _as_grid(items[:max_items])
        if grid is not None:
            return grid
        rows = [(str(k), structured(v, depth=depth + 1, max_depth=max_depth, max_items=max_items))
                for k, v in items[:max_items]]
        if len(items) > max_items:
            rows.append(("…", Html(escape(f"{len(items) - max_items} more entries not shown"))))
        return key_values(rows)
    if isinstance(value, (list, tuple)):
        if not value:
            return Html('<span class="muted">(none)</span>')
        scalars = all(v is None or isinstance(v, (str, numbers.Number)) for v in value)
        numeric = all(isinstance(v, numbers.Number) and not isinstance(v, bool) for v in value)
        if numeric and len(value) > 12:
            vals = [float(v) for v in value]  # type: ignore[arg-type]
            return escape(f"{len(vals):,} values, from {fmt_number(min(vals))} to {fmt_number(max(vals))}")
        if scalars:
            shown = ", ".join(fmt_number(v) for v in value[:max_items])
            more = f" … ({len(value) - max_items} more)" if len(value) > max_items else ""
            return tag("span", shown + more, class_="wrap")
        if depth >= max_depth:
            return tag("span", _short(value), class_="wrap")
        return join(structured(v, depth=depth + 1, max_depth=max_depth, max_items=max_items)
                     for v in value[:max_items])
    if value is None:
        return Html('<span class="muted">–</span>')
    return tag("span", fmt_number(value), class_="wrap")


def _is_scalar(v: object) -> bool:
    return v is None or isinstance(v, (str, numbers.Number))


def _as_grid(items: list[tuple[object, object]]) -> Html | None:
    """{"cpu": {"p50": 1, "p95": 2}, "gpu": {...}} as one table with a column per inner key, when
    every value is a small mapping of scalars (statistics per metric, per node)."""
    if len(items) < 2 or not all(isinstance(v, Mapping) and v and all(_is_scalar(x) for x in v.values())
                                 for _, v in items):
        return None
    columns: list[str] = []
    for _, v in items:
        for k in v:  # type: ignore[attr-defined]
            if str(k) not in columns:
                columns.append(str(k))
    if len(columns) > 12:
        return None
    rows = [[str(k), *({str(a): b for a, b in v.items()}.get(c) for c in columns)]  # type: ignore[attr-defined]
            for k, v in items]
    return table(["", *columns], rows, numeric=range(1, len(columns) + 1), class_="stats details")


def _short(value: object, limit: int = 300) -> str:
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"
