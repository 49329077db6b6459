"""How commands print rule statuses: a table, or JSON in the SDK's `rule_job_summary()` shape."""
from __future__ import annotations

import json
from typing import Any

import click


def sdk_shape(rows: list[dict[str, Any]], job_name: str) -> list[dict[str, Any]]:
    """The SDK's rule_job_summary(): DescribeTrainingJob's rule status entries, exactly (what
    `run --json` and `summary --json` print)."""
    from sdlocal.launcher.statuses.summary import sdk_summary

    return sdk_summary(rows, job_name)


def print_statuses(rows: list[dict[str, Any]], as_json: bool) -> None:
    from sdlocal.launcher.statuses.summary import format_table

    click.echo(json.dumps(rows, indent=1) if as_json else format_table(rows))
