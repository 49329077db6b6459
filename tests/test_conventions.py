"""The naming convention docs/design.md writes down ("Names with a leading underscore"), checked on
every module of the package: a module `_x` is imported only from inside its own package (trial,
hook, evaluator, launcher; the smdebug facade excepted), and a name `_x` only inside its module."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

PACKAGES = ("trial", "hook", "evaluator", "launcher")


def package_folder(name: str) -> Path:
    spec = importlib.util.find_spec(f"sdlocal.{name}")
    assert spec is not None and spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def is_submodule(module: str, name: str) -> bool:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return False  # a module, not a package: `name` is one of its names
    return any((Path(p) / f"{name}.py").is_file() or (Path(p) / name).is_dir() for p in spec.submodule_search_locations)


def private_uses(package: str, path: Path) -> list[str]:
    """This file's imports of another package's private module or of another module's private name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            targets = [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            targets = [(alias.name, None) for alias in node.names]
        else:
            continue
        for module, name in targets:
            parts = module.split(".")
            if parts[0] != "sdlocal":
                continue
            private = [p for p in parts[2:] if p.startswith("_") and not p.startswith("__")]
            if private and parts[1] != package:
                found.append(f"{module} (private to sdlocal.{parts[1]})")
            if name and name.startswith("_") and not name.startswith("__") and not is_submodule(module, name):
                found.append(f"{module}.{name} (private to its module)")
    return found


def test_private_modules_and_names_stay_inside() -> None:
    seen, problems = 0, []
    for package in PACKAGES:
        folder = package_folder(package)
        for path in sorted(folder.rglob("*.py")):
            seen += 1
            problems += [f"{package}/{path.relative_to(folder)}: {u}" for u in private_uses(package, path)]
    assert seen > 250
    assert problems == []


def test_the_check_sees_a_private_import(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from sdlocal.hook._saving import SaveOptions\nfrom sdlocal.launcher.cli.s3 import _nothing\n")
    assert private_uses("launcher", bad) == ["sdlocal.hook._saving (private to sdlocal.hook)",
                                             "sdlocal.launcher.cli.s3._nothing (private to its module)"]
    assert private_uses("hook", bad) == ["sdlocal.launcher.cli.s3._nothing (private to its module)"]
