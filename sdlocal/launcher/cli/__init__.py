"""`sdlocal`: the command line. Thin: each command parses, calls the library, formats (one module
per command group: run, jobs (summary, logs, stop), cleanup (jobs rm, jobs prune), evaluate, rules, s3, serve,
images).

Errors become one `Error: ...` line in ONE place, `Cli.invoke` (launcher/errors.py `describe`;
the exit status an error carries, else 1); `--debug` shows the traceback."""
from __future__ import annotations

from typing import Any

import click

from sdlocal.launcher.cli.cleanup import jobs_group
from sdlocal.launcher.cli.evaluate import evaluate
from sdlocal.launcher.cli.images import images
from sdlocal.launcher.cli.jobs import logs, stop, summary
from sdlocal.launcher.cli.options import DEFAULT_RULE_TIMEOUT_S
from sdlocal.launcher.cli.rules import rules
from sdlocal.launcher.cli.run import run
from sdlocal.launcher.cli.s3 import s3
from sdlocal.launcher.cli.serve import serve

__all__ = ["DEFAULT_RULE_TIMEOUT_S", "cli", "main"]


class Cli(click.Group):
    """The CLI's one error boundary: every exception of every command becomes one `Error: ...` line
    and its exit status (1 unless the error says otherwise); `--debug` re-raises it with its traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        from sdlocal.launcher.errors import describe, exit_code

        try:
            return super().invoke(ctx)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own: usage errors (exit 2), ctx.exit(n), Ctrl-C at a prompt
        except Exception as e:
            if ctx.params.get("debug"):
                raise
            raise _OneLine(describe(e), exit_code(e)) from e


class _OneLine(click.ClickException):
    """click's `Error: <message>` with the exit status the error carries."""

    def __init__(self, message: str, code: int) -> None:
        super().__init__(message)
        self.exit_code = code  # type: ignore[misc] # click's class default is 1


@click.group(cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--debug", is_flag=True, help="Show the full traceback of errors.")
def cli(debug: bool) -> None:
    """sdlocal: Amazon SageMaker Debugger on your own machine (hook, rule evaluators, embedded S3)."""


for command in (run, summary, evaluate, rules, logs, stop, jobs_group, s3, serve, images):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="sdlocal")
