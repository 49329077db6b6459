"""The installed namespace `sdlocal.*` over the repository's top-level folders.

The map is one table in pyproject.toml, `[tool.hatch.build.targets.wheel.hooks.custom] namespace`
(repository folder -> installed path). Wheels (and so sdist -> wheel) get each folder copied to its
path under `sdlocal/`. An editable install cannot remap folders through a .pth
(it can only add whole folders to sys.path, which would make `trial`, `hook`, ... importable as
top-level names again): this hook gives the editable wheel a small import finder instead, which
maps exactly the packages of that table (`sdlocal` itself and each `sdlocal.<folder>`) onto the
checkout, and nothing else. Only the mapped packages are looked up by it; their submodules are
found through their `__path__` as usual, so edits in the checkout take effect without reinstalling.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

FINDER = '''"""sdlocal's editable install: maps the `sdlocal` namespace onto the checkout (hatch_build.py)."""
import importlib.util
import os
import sys

PACKAGES = {packages!r}


class SdlocalCheckoutFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        folder = PACKAGES.get(fullname)
        if folder is None:
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(folder, "__init__.py"), submodule_search_locations=[folder])


if SdlocalCheckoutFinder not in sys.meta_path:
    sys.meta_path.append(SdlocalCheckoutFinder)
'''


class SdlocalLayoutHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        namespace: dict[str, str] = self.config["namespace"]
        if version != "editable":
            for source, target in namespace.items():
                build_data["force_include"][os.path.join(self.root, source)] = target
            return
        packages = {"sdlocal": os.path.join(self.root, "sdlocal")}
        for source, target in namespace.items():
            packages[target.replace("/", ".")] = os.path.join(self.root, source)
        folder = tempfile.mkdtemp(prefix="sdlocal-editable-")
        finder = os.path.join(folder, "_sdlocal_editable.py")
        with open(finder, "w") as fh:
            fh.write(FINDER.format(packages=packages))
        pth = os.path.join(folder, "_sdlocal_editable.pth")
        with open(pth, "w") as fh:
            fh.write("import _sdlocal_editable\n")
        build_data["force_include_editable"][finder] = "_sdlocal_editable.py"
        build_data["force_include_editable"][pth] = "_sdlocal_editable.pth"
