"""The user's own trial module (not sdlocal's)."""
USER = True


def describe() -> str:
    return "trial of the user's project"
