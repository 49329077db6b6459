"""`sdlocal evaluate`: one rule on a finished job's output, in an evaluator process of its own."""
from __future__ import annotations

import threading

import click

from sdlocal.launcher.cli import options
from sdlocal.launcher.cli.output import print_statuses


@click.command()
@click.argument("trial")
@click.option("--rule", "rule_name", metavar="NAME", help="Built-in rule to run (see `sdlocal rules`).")
@click.option("--param", "params", multiple=True, callback=options.kv, metavar="K=V", help="A RuleParameter. Repeatable.")
@click.option("--custom-rule", metavar="FILE.py:CLASS", help="Run a custom rule class from a file instead.")
@click.option("--output", "output", metavar="DIR_OR_S3",
              help="Profiler rules: the rule-output folder their reports go to "
                   "(<output>/profiler-output/profiler-reports/<Rule>.json). Default: not written.")
@options.rule_timeout_option
@options.endpoint_option
@options.s3_option
@click.option("--json", "as_json", is_flag=True, help="Print the final status as JSON.")
@click.pass_context
def evaluate(ctx: click.Context, trial: str, rule_name: str | None, params: tuple[tuple[str, str], ...],
             custom_rule: str | None, output: str | None, rule_timeout: float, s3_endpoint_url: str | None,
             s3_choice: str | None, as_json: bool) -> None:
    """Evaluate one rule on a finished job's output TRIAL (a local folder or an s3:// prefix).

    Debugger rules read a debug-output trial. Profiler rules (`sdlocal rules`, group profiler)
    read the profiler-output found at TRIAL: the folder itself, TRIAL/profiler-output (a job's
    S3 prefix), TRIAL/output/profiler (an sdlocal job folder), or the profiler-output beside a
    debug-output.

    The rule runs in an evaluator process of its own (a custom rule that exits, crashes or hangs
    ends `Error`, saying how). Exit 0 when the rule ran (IssuesFound or NoIssuesFound), 1 on
    Error, 130 when interrupted.
    """
    from sdlocal.launcher.job.evaluate import evaluate_isolated
    from sdlocal.launcher.job.run import stop_on_signals

    custom_file = None
    if custom_rule:
        custom_file, _, rule_name = custom_rule.rpartition(":")
        if not custom_file or not rule_name:
            raise click.BadParameter("expected FILE.py:CLASS", param_hint="--custom-rule")
    if not rule_name:
        raise click.UsageError("give --rule NAME or --custom-rule FILE.py:CLASS")
    uses_s3 = trial.startswith("s3://") or (output or "").startswith("s3://")
    endpoint_env = options.endpoint(s3_endpoint_url, s3_choice).child_env() if uses_s3 else {}
    stop = threading.Event()
    with stop_on_signals(stop):
        row = evaluate_isolated(trial, rule_name, dict(params), custom_rule_file=custom_file,
                                endpoint_env=endpoint_env, rule_timeout_s=rule_timeout, stop=stop,
                                echo=lambda line: click.echo(line, err=True),
                                extra={"report_output": output} if output else None)
    print_statuses([row], as_json)
    if row["RuleEvaluationStatus"] == "Stopped":
        ctx.exit(130)
    if row["RuleEvaluationStatus"] not in ("IssuesFound", "NoIssuesFound"):
        # the culprit (unknown rule, bad parameter, custom rule that fails to import, corrupt
        # tensor file) is in StatusDetails: say it once more on stderr as the command's error
        raise click.ClickException(str(row.get("StatusDetails") or row["RuleEvaluationStatus"]))
