"""Where sdlocal's `smdebug` package lives, and making `import smdebug` resolve to it.

sdlocal ships smdebug's API as a package named `smdebug` (compat/smdebug in the repository,
site-packages/sdlocal/compat/smdebug in a wheel install). A .pth file appends its folder to
sys.path *after* site-packages, so in a user's own Python a real smdebug, where installed, wins.
Processes that sdlocal starts (training, evaluators, `sdlocal evaluate`) call
`use_sdlocal_smdebug()` or get `compat_dir()` first on PYTHONPATH: there it is always sdlocal's,
because only sdlocal's hook coordinates with the launcher and only sdlocal's Rule runs in its loop.
"""
from __future__ import annotations

import sys
from pathlib import Path

# the package sdlocal/: in a wheel install site-packages/sdlocal (compat/ inside it), in a checkout
# the repository's sdlocal/ (compat/ beside it, at the repository's root)
_PACKAGE = Path(__file__).resolve().parent.parent


def compat_dir() -> Path:
    """The folder that holds sdlocal's `smdebug` package: sdlocal/compat/ in a wheel install, the
    repository's compat/ in a checkout."""
    candidates = (_PACKAGE / "compat", _PACKAGE.parent / "compat")
    for candidate in candidates:
        if (candidate / "smdebug" / "__init__.py").is_file():
            return candidate
    raise RuntimeError(f"sdlocal's smdebug package is missing (looked in {' and '.join(map(str, candidates))})")


def is_sdlocal_smdebug(module: object) -> bool:
    return bool(getattr(module, "SDLOCAL", False))


def use_sdlocal_smdebug() -> None:
    """From now on `import smdebug` in this process is sdlocal's: its folder goes first on sys.path
    and a real smdebug already imported is dropped from sys.modules (its objects stay valid)."""
    folder = str(compat_dir())
    if sys.path[:1] != [folder]:
        if folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)
    loaded = sys.modules.get("smdebug")
    if loaded is not None and not is_sdlocal_smdebug(loaded):
        for name in [n for n in sys.modules if n == "smdebug" or n.startswith("smdebug.")]:
            del sys.modules[name]
