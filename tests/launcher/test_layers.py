"""docs/design.md stays true where a reader can check it statically: every repository path it names
exists; the launcher's roles import downwards only (no circle between its folders), the job record is
the only code that names `job.json`, statuses/summary.py imports nothing of job/, spec/ and jobdir/
do not import each other, and no file-level circle is left in launcher/."""
from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAUNCHER = REPO / "sdlocal" / "launcher"
KNOWN_CIRCLES: list[list[str]] = []  # none: keep it so


def module_name(path: Path) -> str:
    parts = path.relative_to(LAUNCHER).with_suffix("").parts
    return ".".join(("sdlocal", "launcher", *parts)).removesuffix(".__init__")


def launcher_imports() -> dict[str, set[str]]:
    """Each launcher module -> the launcher modules it imports (at any level of the file)."""
    modules = {module_name(p): p for p in LAUNCHER.rglob("*.py")}
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sdlocal.launcher"):
                for target in [f"{node.module}.{a.name}" for a in node.names] + [node.module]:
                    if target in modules:
                        if target != name:
                            edges[name].add(target)
                        break
    return edges


def role(module: str) -> str:
    return module.split(".")[2]


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                out.append(sorted(part))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out)


def test_no_circle_between_modules_nor_roles() -> None:
    edges = launcher_imports()
    assert circles(edges) == KNOWN_CIRCLES
    roles: dict[str, set[str]] = defaultdict(set)
    for source, targets in edges.items():
        roles[role(source)] |= {role(t) for t in targets if role(t) != role(source)}
    assert circles(roles) == []
    assert not any(role(t) == "job" for t in edges["sdlocal.launcher.statuses.summary"])
    assert not any(role(t) == "jobdir" for s, ts in edges.items() if role(s) == "spec" for t in ts)


def test_only_the_job_record_reads_and_writes_job_json() -> None:
    naming = sorted(str(p.relative_to(REPO)) for p in LAUNCHER.rglob("*.py")
                    if re.search(r"""["']job\.json["']""", p.read_text()))
    assert naming == ["sdlocal/launcher/jobdir/folder.py"]  # the folder's layout names it, as its other files
    touching = sorted(str(p.relative_to(REPO)) for p in LAUNCHER.rglob("*.py")
                      if re.search(r"\.record\.(read|write|open)|\bRECORD\b", p.read_text()))
    assert touching == ["sdlocal/launcher/job/record.py", "sdlocal/launcher/jobdir/folder.py"]


def test_every_path_the_design_names_exists() -> None:
    text = (REPO / "docs" / "design.md").read_text()
    tops = sorted(p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith("."))
    named = {m.group(1) for m in re.finditer(rf"(?<![\w./-])((?:{'|'.join(tops)})/[\w./-]*[\w/])", text)}
    assert len(named) > 50  # the doc names its modules
    assert sorted(p for p in named if "..." not in p and not (REPO / p).exists()) == []
