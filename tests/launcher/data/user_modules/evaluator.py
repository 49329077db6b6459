"""The user's own evaluator module (not sdlocal's)."""
USER = True


def describe() -> str:
    return "evaluator of the user's project"
