"""The user's own hook module (not sdlocal's)."""
USER = True


def describe() -> str:
    return "hook of the user's project"
