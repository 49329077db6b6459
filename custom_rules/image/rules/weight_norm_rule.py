"""WeightNormRule: fires when the L2 norm of any saved weight tensor exceeds `threshold` (a sign of
diverging training). Pure numpy, written against smdebug's rule API like the documentation's
CustomGradientRule, so the same file runs on SageMaker, under `sdlocal evaluate` and in a custom
rule image (custom_rules/image)."""
import numpy as np
from smdebug.rules.rule import Rule


class WeightNormRule(Rule):
    def __init__(self, base_trial, threshold="100.0", collection_names="weights"):
        super().__init__(base_trial)
        self.threshold = float(threshold)
        self.collection_names = [c.strip() for c in collection_names.split(",") if c.strip()]

    def invoke_at_step(self, step):
        for collection in self.collection_names:
            for name in self.base_trial.tensor_names(collection=collection):
                tensor = self.base_trial.tensor(name)
                if step not in tensor.steps():
                    continue
                norm = float(np.linalg.norm(np.asarray(tensor.value(step), dtype=np.float64)))
                if norm > self.threshold:
                    self.logger.info("step %d: |%s| = %.3g > %.3g", step, name, norm, self.threshold)
                    return True
        return False
