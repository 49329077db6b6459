"""sdlocal's `smdebug`: the API of Amazon SageMaker Debugger's open-source library (smdebug 1.0),
backed by sdlocal's trial reader (trial/), hook (hook/) and rule API (evaluator/).

Scripts and rules written against smdebug import this package unchanged. Importing it (or
`smdebug.trials`, `smdebug.rules`) never imports torch; `smdebug.pytorch` does.
How it coexists with a real smdebug installation: compat/README.md.
"""
from __future__ import annotations

from smdebug.core.collection import CollectionKeys
from smdebug.core.modes import ModeKeys as modes
from smdebug.core.reduction_config import ReductionConfig
from smdebug.core.save_config import SaveConfig, SaveConfigMode

__version__ = "1.0.34+sdlocal"
SDLOCAL = True  # tells sdlocal's smdebug from the real one: getattr(smdebug, "SDLOCAL", False)

__all__ = ["CollectionKeys", "ReductionConfig", "SaveConfig", "SaveConfigMode", "modes", "__version__"]
