"""A two-trial custom rule in smdebug's style (`other_trials`): compare the same tensors at the same
step in the base trial and in another run, and fire when they differ by more than `rtol`.

    sdlocal evaluate s3://bucket/jobs/job-a/debug-output \
        --custom-rule custom_rules/compare_trials_rule.py:CompareTrialsRule \
        --param other_trial_0=s3://bucket/jobs/job-b/debug-output --param tensor_regex='.*Loss_output_0'

In a job spec: RuleParameters {"source_s3_uri": "compare_trials_rule.py", "rule_to_invoke":
"CompareTrialsRule", "other_trials": "s3://bucket/jobs/job-b/debug-output"} (or `other_trial_0`).
A step the other run did not save is not evaluated.
"""
import numpy as np
from smdebug.rules.rule import Rule


class CompareTrialsRule(Rule):
    def __init__(self, base_trial, other_trials=None, tensor_regex=".*Loss_output_0", rtol="0.1", action_str=""):
        super().__init__(base_trial, action_str=action_str, other_trials=other_trials)
        if not other_trials:
            raise ValueError("CompareTrialsRule needs another trial (other_trial_0 or other_trials)")
        self.other = self.other_trials[0]
        self.tensor_regex = tensor_regex
        self.rtol = float(rtol)

    def set_required_tensors(self, step):
        for tname in self.base_trial.tensor_names(regex=self.tensor_regex):
            self.req_tensors.add(tname, steps=[step])
            self.req_tensors.add(tname, steps=[step], trial=self.other)

    def invoke_at_step(self, step):
        for tensor in self.req_tensors.get():
            mine = tensor.value(step)
            theirs = self.other.tensor(tensor.name).value(step)
            if mine.shape != theirs.shape or not np.allclose(mine, theirs, rtol=self.rtol, equal_nan=True):
                self.logger.info("%s differs from the other run at step %s", tensor.name, step)
                return True
        return False
