"""Read a report page back structurally (stdlib html.parser): tables as rows of cell texts, the
figures' titles, the notes, every URL-bearing attribute."""
from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser

URL_ATTRIBUTES = {"src", "href", "xlink:href", "action", "formaction", "data", "poster", "srcset", "background"}


@dataclass
class ParsedPage:
    tables: dict[str, list[list[str]]] = field(default_factory=dict)  # class -> body rows (first table)
    row_classes: dict[str, list[str]] = field(default_factory=dict)
    figure_titles: list[str] = field(default_factory=list)  # the aria-label of each inline <svg>
    notes: list[str] = field(default_factory=list)
    urls: list[tuple[str, str, str]] = field(default_factory=list)  # (tag, attribute, value)
    tags: dict[str, int] = field(default_factory=dict)  # tag name -> count
    text: str = ""
    title: str = ""


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = ParsedPage()
        self._table: str | None = None
        self._table_depth = 0
        self._in_body = False
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._note: list[str] | None = None
        self._note_depth = 0
        self._in_title = False
        self._text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        self.page.tags[tag] = self.page.tags.get(tag, 0) + 1
        for k, v in a.items():
            if k.lower() in URL_ATTRIBUTES:
                self.page.urls.append((tag, k, v))
        if tag == "svg" and "aria-label" in a:
            self.page.figure_titles.append(a["aria-label"])
        if tag == "title":
            self._in_title = True
        if tag == "table":
            if self._table is None and a.get("class") and a["class"] not in self.page.tables:
                self._table = a["class"]
                self._table_depth = 1
                self.page.tables[self._table] = []
                self.page.row_classes[self._table] = []
            elif self._table is not None:
                self._table_depth += 1
        if self._table is not None and self._table_depth == 1:
            if tag == "tbody":
                self._in_body = True
            elif tag == "tr" and self._in_body:
                self._row = []
                self.page.row_classes[self._table].append(a.get("class", ""))
            elif tag == "td" and self._row is not None:
                self._cell = []
        if tag == "div" and "note" in a.get("class", "").split():
            self._note, self._note_depth = [], 1
        elif tag == "div" and self._note is not None:
            self._note_depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._in_title = False
        if self._table is not None:
            if tag == "table":
                self._table_depth -= 1
                if self._table_depth == 0:
                    self._table, self._in_body = None, False
            elif self._table_depth == 1:
                if tag == "td" and self._cell is not None and self._row is not None:
                    self._row.append(" ".join("".join(self._cell).split()))
                    self._cell = None
                elif tag == "tr" and self._row is not None:
                    self.page.tables[self._table].append(self._row)
                    self._row = None
        if tag == "div" and self._note is not None:
            self._note_depth -= 1
            if self._note_depth == 0:
                self.page.notes.append(" ".join("".join(self._note).split()))
                self._note = None

    def handle_data(self, data: str) -> None:
        if self._in_title:
            self.page.title += data
        if self._cell is not None:
            self._cell.append(data)
        if self._note is not None:
            self._note.append(data)
        self._text.append(data)

    def close(self) -> None:
        super().close()
        self.page.text = " ".join("".join(self._text).split())


def parse_page(text: str) -> ParsedPage:
    p = _Parser()
    p.feed(text)
    p.close()
    return p.page
