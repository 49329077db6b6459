"""A custom rule in the style of smdebug's documentation that works with training modes: it fires
when the EVAL loss has not dropped by `min_drop` (a fraction of the first EVAL loss when
`relative`) after more than `patience` EVAL passes. Written against smdebug's API only (`modes`,
`smdebug.exceptions`, `str2bool`, `Tensor.prev_steps`), it runs unchanged under sdlocal:

    sdlocal evaluate TRIAL --custom-rule custom_rules/eval_loss_rule.py:EvalLossNotDecreasing

and, as smdebug's documentation invokes rules outside SageMaker, in your own Python:

    python custom_rules/eval_loss_rule.py TRIAL [MIN_DROP]   # exit status 1 when the condition is met
"""
import sys

from smdebug import modes
from smdebug.exceptions import NoMoreData, RuleEvaluationConditionMet, TensorUnavailableForStep
from smdebug.profiler.utils import str2bool
from smdebug.rules.rule import Rule
from smdebug.rules.rule_invoker import invoke_rule
from smdebug.trials import create_trial


class EvalLossNotDecreasing(Rule):
    def __init__(self, base_trial, loss_regex="Loss_output_0", min_drop="0.1", patience="3", relative="True",
                 action_str=""):
        super().__init__(base_trial, action_str=action_str)
        self.loss_regex = loss_regex
        self.min_drop = float(min_drop)
        self.patience = int(patience)
        self.relative = str2bool(relative)

    def invoke_at_step(self, step):
        if self.base_trial.mode(step) != modes.EVAL:
            return False
        mode_step = self.base_trial.mode_step(step)
        for tname in self.base_trial.tensor_names(regex=self.loss_regex, mode=modes.EVAL):
            loss = self.base_trial.tensor(tname)
            passes = loss.prev_steps(mode_step, mode=modes.EVAL)  # EVAL steps up to this one
            if len(passes) <= self.patience:
                continue
            try:
                first = float(loss.value(passes[0], mode=modes.EVAL))
                now = float(loss.value(mode_step, mode=modes.EVAL))
            except TensorUnavailableForStep:
                continue
            needed = self.min_drop * abs(first) if self.relative else self.min_drop
            if first - now < needed:
                self.logger.info("%s: EVAL loss %g after %d passes, first %g", tname, now, len(passes), first)
                return True
        return False


if __name__ == "__main__":
    trial = create_trial(sys.argv[1])
    rule = EvalLossNotDecreasing(trial, min_drop=sys.argv[2] if len(sys.argv) > 2 else "0.1")
    try:
        invoke_rule(rule, start_step=0, end_step=None, raise_eval_cond=True)
    except RuleEvaluationConditionMet as e:
        print(e)
        sys.exit(1)
    except NoMoreData:
        print("The training has ended and there is no more data to be analyzed. This is expected behavior.")
    print("No issues found")
