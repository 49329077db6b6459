"""The user's own launcher module (not sdlocal's)."""
USER = True


def describe() -> str:
    return "launcher of the user's project"
