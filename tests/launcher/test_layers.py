"""docs/design.md stays true where a reader can check it statically: every repository path it names
exists; the launcher's roles import downwards only (no circle between its folders), the job record is
the only code that names `job.json`, statuses/summary.py imports nothing of job/, spec/ and jobdir/
do not import each other, no file-level circle is left in launcher/, and the names it gives
(`sdlocal.x.y`, `Class.member` of our classes) exist."""
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


def _class_members() -> dict[str, set[str]]:
    """Every class of the package -> the names its body and its bases' bodies define (methods,
    fields, attributes)."""
    members: dict[str, set[str]] = defaultdict(set)
    bases: dict[str, set[str]] = defaultdict(set)
    for path in (REPO / "sdlocal").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases[node.name].update(b.id for b in node.bases if isinstance(b, ast.Name))
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        members[node.name].add(item.name)
                    elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                        members[node.name].add(item.target.id)
                    elif isinstance(item, ast.Assign):
                        members[node.name].update(t.id for t in item.targets if isinstance(t, ast.Name))

    def inherited(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        out = set(members.get(name, ()))
        for base in bases.get(name, set()) - seen - {name}:
            out |= inherited(base, seen | {name})
        return out

    return {name: inherited(name) for name in list(members)}


def test_every_name_the_design_gives_exists() -> None:
    """`sdlocal.x.y` names import (a module or one of its attributes); `Class.member` names of a
    class of ours are defined in that class (names of other libraries' classes are theirs)."""
    import importlib

    text = (REPO / "docs" / "design.md").read_text()
    dotted = set(re.findall(r"`(sdlocal(?:\.\w+)+)`", text))
    missing = []
    for name in sorted(dotted):
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            try:
                obj: object = importlib.import_module(".".join(parts[:i]))
            except ModuleNotFoundError:
                continue
            try:
                for attr in parts[i:]:
                    obj = getattr(obj, attr)
            except AttributeError:
                missing.append(name)
            break
    members = _class_members()
    qualified = set(re.findall(r"`([A-Z]\w+)\.(\w+)", text))
    checked = [(c, m) for c, m in sorted(qualified) if c in members]
    missing += [f"{c}.{m}" for c, m in checked if m not in members[c]]
    assert len(dotted) >= 5 and len(checked) >= 8  # the doc names them
    assert missing == []
