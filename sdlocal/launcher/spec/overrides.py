"""Command-line flags that build or extend a job request (`sdlocal run --rule ... --hyperparameter ...`).

`--rule-param k=v` belongs to the closest `--rule`/`--custom-rule` before it on the command line;
the CLI reconstructs that order and hands this module `RuleFlag`s already grouped.
"""
from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def parse_kv(text: str) -> tuple[str, str]:
    """`key=value` -> (key, value); the value may contain '='."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ValueError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def parse_collection(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`gradients` or `gradients:save_interval=10,reductions=mean`."""
    name, _, rest = text.partition(":")
    if not name.strip():
        raise ValueError(f"expected NAME or NAME:KEY=VALUE,..., got {text!r}")
    params = tuple(parse_kv(part) for part in rest.split(",") if part.strip()) if rest else ()
    return name.strip(), params


@dataclass(frozen=True)
class RuleFlag:
    """One `--rule NAME` or `--custom-rule FILE.py:Class`, with the `--rule-param`s that follow it."""

    name: str
    params: tuple[tuple[str, str], ...] = ()
    source: Path | None = None  # the custom rule file (absolute)

    @classmethod
    def custom(cls, text: str, params: tuple[tuple[str, str], ...] = ()) -> RuleFlag:
        path, sep, class_name = text.rpartition(":")
        if not sep or not path or not class_name.isidentifier():
            raise ValueError(f"expected FILE.py:ClassName, got {text!r}")
        return cls(class_name, params, Path(path).resolve())

    def to_request(self) -> dict[str, Any]:
        params = {"rule_to_invoke": self.name, **dict(self.params)}
        if self.source is not None:
            params["source_s3_uri"] = str(self.source)
        return {"RuleConfigurationName": self.name, "RuleParameters": params}


@dataclass(frozen=True)
class Overrides:
    entry_point: str | None = None
    source_dir: Path | None = None
    job_name: str | None = None
    hyperparameters: tuple[tuple[str, str], ...] = ()
    rules: tuple[RuleFlag, ...] = ()
    hook_params: tuple[tuple[str, str], ...] = ()
    collections: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    s3_output_path: str | None = None  # also pass it as spec_from_request(default_output_path=...)
    channels: tuple[tuple[str, str], ...] = ()  # (ChannelName, s3:// prefix, file:// URI or local path)

    def apply(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """A new request: the flags win over the spec's fields; rules and collections are appended."""
        req = copy.deepcopy(dict(request))
        if self.entry_point:
            req["EntryPoint"] = self.entry_point
        if self.source_dir:
            req["SourceDir"] = str(self.source_dir.resolve())
        if self.job_name:
            req["TrainingJobName"] = self.job_name
        if self.hyperparameters:
            req["HyperParameters"] = {**(req.get("HyperParameters") or {}), **dict(self.hyperparameters)}
        if self.rules:
            req["DebugRuleConfigurations"] = list(req.get("DebugRuleConfigurations") or []) + [
                r.to_request() for r in self.rules
            ]
        if self.hook_params or self.collections:
            hook = req.setdefault("DebugHookConfig", {}) or {}
            req["DebugHookConfig"] = hook
            if self.hook_params:
                hook["HookParameters"] = {**(hook.get("HookParameters") or {}), **dict(self.hook_params)}
            for name, params in self.collections:
                entry: dict[str, Any] = {"CollectionName": name}
                if params:
                    entry["CollectionParameters"] = dict(params)
                hook.setdefault("CollectionConfigurations", []).append(entry)
        if self.channels:
            named = {name for name, _ in self.channels}
            kept = [c for c in req.get("InputDataConfig") or [] if not (isinstance(c, dict) and c.get("ChannelName") in named)]
            req["InputDataConfig"] = kept + [channel_request(name, uri) for name, uri in self.channels]
        if self.s3_output_path:
            for key in ("DebugHookConfig", "ProfilerConfig", "OutputDataConfig"):
                if isinstance(req.get(key), dict):
                    req[key]["S3OutputPath"] = self.s3_output_path
        return req


def channel_request(name: str, uri: str) -> dict[str, Any]:
    """`--channel NAME=URI`: an s3:// prefix, a file:// URI, or a local path (resolved here)."""
    if not uri.startswith(("s3://", "file://")):
        uri = "file://" + str(Path(uri).resolve())
    return {"ChannelName": name, "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri}}}


RULE_OPTIONS = ("--rule", "--rule-param", "--custom-rule")


def rule_options_in_order(args: list[str]) -> list[tuple[str, str]]:
    """(option, value) for each --rule/--rule-param/--custom-rule, in command-line order."""
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            break
        name, eq, value = arg.partition("=")
        if name in RULE_OPTIONS:
            if eq:
                out.append((name, value))
            elif i + 1 < len(args):
                out.append((name, args[i + 1]))
                i += 1
        i += 1
    return out


def group_rule_flags(options: list[tuple[str, str]]) -> tuple[RuleFlag, ...]:
    """Attach each `--rule-param` to the closest `--rule`/`--custom-rule` before it."""
    pending: list[tuple[str, str, list[tuple[str, str]]]] = []
    for option, value in options:
        if option == "--rule-param":
            if not pending:
                raise ValueError("--rule-param must follow the --rule or --custom-rule it configures")
            pending[-1][2].append(parse_kv(value))
        else:
            pending.append((option, value, []))
    flags = []
    for option, value, params in pending:
        if option == "--custom-rule":
            flags.append(RuleFlag.custom(value, tuple(params)))
        else:
            flags.append(RuleFlag(value, tuple(params)))
    return tuple(flags)
