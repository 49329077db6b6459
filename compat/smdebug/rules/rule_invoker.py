"""smdebug.rules.rule_invoker: `invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=False)`."""
from __future__ import annotations

from sdlocal.evaluator.rule_invoker import invoke_rule

__all__ = ["invoke_rule"]
