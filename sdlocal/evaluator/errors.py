"""The evaluator's errors: one base class, converted to a status (`ClientError: ...`) by the loop
and the entry point, or to a one-line CLI error by the launcher."""
from __future__ import annotations

from sdlocal.trial.errors import OneLineError


class EvaluatorError(OneLineError):
    """Base of every error raised by the evaluator package."""


class RuleParameterError(EvaluatorError):
    """A rule parameter has a value the rule cannot use (names the rule and the parameter)."""

    def __init__(self, rule: str, parameter: str, value: object, reason: str) -> None:
        self.rule = rule
        self.parameter = parameter
        self.value = value
        self.reason = reason
        super().__init__(f"Rule {rule}: invalid value {value!r} for parameter '{parameter}': {reason}")


class UnknownRuleError(EvaluatorError):
    """No built-in rule has this name; the message lists close matches."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        msg = f"Unknown rule '{name}'."
        if suggestions:
            msg += f" Did you mean: {', '.join(suggestions)}?"
        else:
            msg += " Run `sdlocal rules` to list the built-in rules."
        super().__init__(msg)


class CustomRuleError(EvaluatorError):
    """A custom rule file cannot be loaded (syntax error, import error, missing class, download)."""


class CorruptStatusError(EvaluatorError, ValueError):
    """A `status.json` that is not a rule status (torn, foreign, or not JSON); names the file."""


class ContractError(EvaluatorError):
    """The evaluator's environment contract is incomplete or malformed (names the variable)."""

    def __init__(self, variable: str, reason: str) -> None:
        self.variable = variable
        self.reason = reason
        super().__init__(f"{variable}: {reason}")


class AnalysisError(EvaluatorError):
    """The profiler analysis API (evaluator/analysis, smdebug.profiler.analysis) cannot do what was asked."""


class MissingExtra(AnalysisError, ImportError):
    """An optional dependency of the analysis API is not installed; the message names the extra."""

    def __init__(self, module: str, extra: str = "analysis") -> None:
        self.module = module
        self.extra = extra
        super().__init__(f"{module} is not installed: the profiler analysis API needs it "
                         f"(pip install 'sdlocal[{extra}]')")


class ProfilerDataTimeout(AnalysisError, TimeoutError):
    """Profiler data did not appear before a wait's deadline (names what was waited for and where)."""
