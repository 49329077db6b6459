"""`import smdebug` in these tests is this checkout's compat/smdebug (an editable install of another
checkout, or a real smdebug, could come first on sys.path otherwise)."""
from __future__ import annotations

from sdlocal.trial.smdebug_shim import use_sdlocal_smdebug

use_sdlocal_smdebug()
