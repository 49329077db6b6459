"""The repository's layout as a static tool reads it (docs/design.md, "Layout"): in a fresh copy of
the checkout, installed nowhere, every `sdlocal.<package>.<module>` import of the package resolves
to a file by its path alone, and the imports between trial, hook, evaluator and launcher point
down only. The root's trial, hook, evaluator and launcher are symlinks into sdlocal/."""
from __future__ import annotations

import ast
import shutil
import subprocess
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO_ROOT

PACKAGES = ("trial", "hook", "evaluator", "launcher")
# who may import whom: trial nothing of ours; the hook and the evaluator the trial; the launcher all
ALLOWED = {"trial": set(), "hook": {"trial"}, "evaluator": {"trial"}, "launcher": {"trial", "hook", "evaluator"}}


def fresh_copy(dest: Path) -> Path:
    """The files git knows of (tracked and new, not ignored), symlinks kept as symlinks: what a
    clone holds, without its history."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=REPO_ROOT, check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        source, target = REPO_ROOT / name, dest / name
        if not source.is_symlink() and not source.exists():
            continue  # deleted in the working tree, not yet in the index
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(source.readlink())
        else:
            shutil.copy2(source, target)
    return dest


def resolve(clone: Path, module: str, name: str | None) -> Path | None:
    """The file that `from module import name` (or `import module`) reads, found by path only."""
    candidates = [module, f"{module}.{name}"] if name else [module]
    for dotted in reversed(candidates):
        base = clone.joinpath(*dotted.split("."))
        for path in (base.with_suffix(".py"), base / "__init__.py"):
            if path.is_file():
                return path
    return None


def sdlocal_imports(clone: Path) -> list[tuple[Path, str, str | None]]:
    found = []
    for path in sorted((clone / "sdlocal").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == "sdlocal":
                found += [(path, node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                found += [(path, alias.name, None) for alias in node.names if alias.name.split(".")[0] == "sdlocal"]
    return found


def test_a_fresh_copy_resolves_every_sdlocal_import_to_a_file_with_none_pointing_up(tmp_path: Path) -> None:
    clone = fresh_copy(tmp_path / "clone")
    imports = sdlocal_imports(clone)
    assert len(imports) > 500  # the whole package was read
    unresolved = [f"{p.relative_to(clone)}: {m} {n or ''}" for p, m, n in imports if resolve(clone, m, n) is None]
    assert unresolved == []
    edges: dict[str, set[str]] = defaultdict(set)
    for path, module, name in imports:
        target = resolve(clone, module, name)
        assert target is not None
        source_package, target_package = (p.relative_to(clone / "sdlocal").parts[0] for p in (path, target))
        if source_package in PACKAGES and target_package in PACKAGES and source_package != target_package:
            edges[source_package].add(target_package)
    assert {p for p in PACKAGES if edges[p]} == {"hook", "evaluator", "launcher"}  # the graph is connected
    upward = {p: sorted(edges[p] - ALLOWED[p]) for p in PACKAGES if edges[p] - ALLOWED[p]}
    assert upward == {}


def test_the_root_names_are_symlinks_into_the_package() -> None:
    for name in PACKAGES:
        link = REPO_ROOT / name
        assert link.is_symlink() and link.readlink() == Path("sdlocal") / name, name
        assert (REPO_ROOT / "sdlocal" / name / "__init__.py").is_file()
