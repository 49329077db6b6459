"""A training folder that holds modules named like sdlocal's old top-level packages (trial.py,
hook.py, evaluator.py, launcher.py, as common in ML code) and a rule file smdebug_rules.py: the
script imports its own modules, then trains examples/train.py's MLP (copied beside it as mlp.py)."""
import os
import runpy

import smdebug_rules

import evaluator
import hook
import launcher
import trial

for module in (trial, hook, evaluator, launcher, smdebug_rules):
    assert getattr(module, "USER", False), f"{module.__name__}: not the user's own module ({module.__file__})"
print("the user's own modules:", ", ".join(m.__name__ for m in (trial, hook, evaluator, launcher, smdebug_rules)),
      flush=True)
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "mlp.py"), run_name="__main__")
