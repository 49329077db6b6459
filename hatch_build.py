"""The editable install of the `sdlocal` package (the checkout's sdlocal/ folder).

Hatch's default editable install puts a folder on sys.path through a .pth: for a package at the
repository's root that folder is the root, and `tests`, `detection`, `benchmarks`, ... (and the root's
symlinks `trial`, `hook`, ...) would become importable top-level names, shadowing a user's own
`trial.py`. This hook gives the editable wheel a small import finder instead, which maps exactly one
name, `sdlocal`, onto the checkout's sdlocal/ folder; its submodules are found through its `__path__`
as usual, so edits in the checkout take effect without reinstalling. Wheels need nothing from here.
"""
from __future__ import annotations

import os
import tempfile
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

FINDER = '''"""sdlocal's editable install: maps the `sdlocal` package onto the checkout (hatch_build.py)."""
import importlib.util
import os
import sys

FOLDER = {folder!r}


class SdlocalCheckoutFinder:
    @classmethod
    def find_spec(cls, fullname, path=None, target=None):
        if fullname != "sdlocal":
            return None
        return importlib.util.spec_from_file_location(
            fullname, os.path.join(FOLDER, "__init__.py"), submodule_search_locations=[FOLDER])


if SdlocalCheckoutFinder not in sys.meta_path:
    sys.meta_path.append(SdlocalCheckoutFinder)
'''


class SdlocalEditableHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version != "editable":
            return
        folder = tempfile.mkdtemp(prefix="sdlocal-editable-")
        finder = os.path.join(folder, "_sdlocal_editable.py")
        with open(finder, "w") as fh:
            fh.write(FINDER.format(folder=os.path.join(self.root, "sdlocal")))
        pth = os.path.join(folder, "_sdlocal_editable.pth")
        with open(pth, "w") as fh:
            fh.write("import _sdlocal_editable\n")
        build_data["force_include_editable"][finder] = "_sdlocal_editable.py"
        build_data["force_include_editable"][pth] = "_sdlocal_editable.pth"
