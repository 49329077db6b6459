"""The user's rule file, beside the training script, written as for SageMaker Debugger."""
import math

from smdebug.rules.rule import Rule

USER = True


class LossIsFinite(Rule):
    def __init__(self, base_trial):
        super().__init__(base_trial)

    def invoke_at_step(self, step):
        for name in self.base_trial.tensor_names(collection="losses"):
            if not math.isfinite(float(self.base_trial.tensor(name).value(step))):
                return True
        return False
