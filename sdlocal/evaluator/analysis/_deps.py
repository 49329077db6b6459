"""The analysis API's optional dependencies (the `analysis` extra: pandas, bokeh), imported when
first needed: `import sdlocal.evaluator.analysis...` never needs them, using a frame or a chart does."""
from __future__ import annotations

import importlib
from types import ModuleType

from sdlocal.evaluator.errors import MissingExtra


def require(module: str) -> ModuleType:
    """The module, or MissingExtra (one line: the module and `pip install 'sdlocal[analysis]'`)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".", 1)[0]
        if e.name is not None and e.name.split(".", 1)[0] != top:
            raise  # the module is there but something it imports is broken: say that instead
        raise MissingExtra(top) from None


def pandas() -> ModuleType:
    return require("pandas")
