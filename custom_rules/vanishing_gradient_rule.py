"""The custom rule of smdebug's documentation ("Writing a custom rule"), written against smdebug
1.0's signature `Rule(base_trial, action_str, other_trials=None)` and declaring what it reads
through `req_tensors`. It runs here unchanged, with no smdebug installed.

    sdlocal evaluate TRIAL --custom-rule custom_rules/vanishing_gradient_rule.py:VanishingGradientRule
"""
from smdebug.rules.rule import Rule


class VanishingGradientRule(Rule):
    def __init__(self, base_trial, action_str="", threshold=0.0000001):
        super().__init__(base_trial, action_str=action_str)
        self.threshold = float(threshold)

    def set_required_tensors(self, step):
        for tname in self.base_trial.tensor_names(collection="gradients"):
            self.req_tensors.add(tname, steps=[step])

    def invoke_at_step(self, step):
        for tensor in self.req_tensors.get():
            abs_mean = tensor.reduction_value(step, "mean", abs=True)
            if abs_mean < self.threshold:
                return True
        return False
