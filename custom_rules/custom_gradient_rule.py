"""The CustomGradientRule of SageMaker Debugger's documentation, unmodified in spirit: written
against smdebug's rule API (`from smdebug.rules.rule import Rule`), it runs here with no smdebug.

    sdlocal evaluate TRIAL --custom-rule custom_rules/custom_gradient_rule.py:CustomGradientRule \
        --param threshold=20
"""
from smdebug.rules.rule import Rule


class CustomGradientRule(Rule):
    def __init__(self, base_trial, threshold="10.0"):
        super().__init__(base_trial)
        self.threshold = float(threshold)

    def invoke_at_step(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            t = self.base_trial.tensor(tname)
            abs_mean = t.reduction_value(step, "mean", abs=True)
            if abs_mean > self.threshold:
                return True
        return False
