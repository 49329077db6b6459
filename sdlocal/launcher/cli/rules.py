"""`sdlocal rules`: the built-in rules, their parameters and defaults."""
from __future__ import annotations

import json

import click


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the rules as JSON.")
def rules(as_json: bool) -> None:
    """List the built-in rules (Debugger rules, then profiler rules) by group, with their parameters,
    then the recommended rule set (`sdlocal run --recommended-rules`)."""
    from sdlocal.evaluator.recommended import NAME, RECOMMENDED
    from sdlocal.evaluator.registry import builtin_rule_infos

    infos = builtin_rule_infos()
    chosen = {r.name for r in RECOMMENDED}
    if as_json:
        click.echo(json.dumps([{"name": i.name, "group": i.group, "kind": str(i.kind), "parameters": dict(i.parameters),
                                "default_collections": [{"CollectionName": c.name, "CollectionParameters": c.parameter_map}
                                                        for c in i.default_collections],
                                "description": i.description, "recommended": i.name in chosen} for i in infos], indent=1))
        return
    width = max([len("Rule"), *(len(i.name) for i in infos)])
    gwidth = max([len("Group"), *(len(i.group) for i in infos)])
    click.echo(f"{'Rule'.ljust(width)}  {'Group'.ljust(gwidth)}  Parameters (defaults)")
    group = None
    for i in infos:
        if group is not None and i.group != group:
            click.echo("")
        group = i.group
        params = ", ".join(f"{k}={v}" if v else k for k, v in i.parameters)
        click.echo(f"{i.name.ljust(width)}  {i.group.ljust(gwidth)}  {params}".rstrip())
    click.echo("")
    click.echo(f"Recommended set ({NAME}: `sdlocal run --recommended-rules`, or a DebugRuleConfigurations "
               f"entry named {NAME}):")
    for r in RECOMMENDED:
        params = ", ".join(f"{k}={v}" for k, v in r.parameters.items()) or "defaults"
        click.echo(f"  {r.name.ljust(width)}  {params}  ({r.why})")
