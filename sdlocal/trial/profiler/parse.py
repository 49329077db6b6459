"""Decoding one profiler file (bytes) into records, with damage reports.

System files are JSON Lines; trace files are a JSON array written one event per line (smdebug's
timeline writer, TensorFlow's model timeline), parsed line by line so damage has a line number,
or as one JSON document when laid out otherwise. A damaged LAST line is skipped silently: it is
what a file cut short while being written looks like (the fixture `1591160699.algo-1.json.corrupt`
ends in `..."NodeId":"algo-1"` with no Timestamp and no closing brace). Damage anywhere else is
reported as a `Damage(key, line, message)` and that line is skipped; the rest of the file is read.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

from sdlocal.trial.profiler.errors import Damage


class SystemRecord(NamedTuple):
    node: str
    type: str
    name: str
    dimension: str
    timestamp_us: int
    value: float


@dataclass(frozen=True, slots=True)
class TraceEvent:
    """A complete event: `phase` is its Chrome-trace process name (smdebug's training phase,
    e.g. "Step:ModeKeys.TRAIN", "Forward", "DataLoaderIter"); times in epoch µs."""

    name: str
    phase: str
    start_us: int
    end_us: int
    pid: int
    tid: int
    node: str
    args: dict[str, Any] | None
    # the file's kind, its name's suffix ("pythontimeline.json", "model_timeline.json",
    # "horovod_timeline.json"): smdebug's analysis selects events by it (file_suffix_filter)
    source: str = ""

    @property
    def duration_us(self) -> int:
        return self.end_us - self.start_us


class Parsed(NamedTuple):
    records: list[Any]
    damage: list[Damage]
    partial_last_line: bool  # a damaged last line was skipped


def _is_number(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _system_record(obj: object) -> SystemRecord:
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    missing = [k for k in ("Type", "Dimension", "Value", "NodeId", "Timestamp") if k not in obj]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    name = obj.get("Name", "")  # smdebug treats Name as optional
    if not all(isinstance(obj[k], str) for k in ("Type", "Dimension", "NodeId")) or not isinstance(name, str):
        raise ValueError("Type, Name, Dimension and NodeId must be strings")
    if not _is_number(obj["Value"]) or not _is_number(obj["Timestamp"]):
        raise ValueError("Value and Timestamp must be numbers")
    return SystemRecord(obj["NodeId"], obj["Type"], name, obj["Dimension"],
                        int(round(obj["Timestamp"] * 1_000_000)), float(obj["Value"]))


def _lines(data: bytes) -> list[tuple[int, str]]:
    """(1-based line number, text) of the non-blank lines."""
    text = data.decode("utf-8", errors="replace")
    return [(i, line) for i, line in enumerate(text.split("\n"), 1) if line.strip()]


def _parse_lines(
    lines: list[tuple[int, str]], key: str, decode: Callable[[str], Any]
) -> tuple[list[Any], list[Damage], bool]:
    out: list[Any] = []
    damage: list[Damage] = []
    partial = False
    last = len(lines) - 1
    for pos, (lineno, line) in enumerate(lines):
        try:
            out.append(decode(line))
        except (ValueError, TypeError, KeyError) as e:
            if pos == last:
                partial = True
            else:
                damage.append(Damage(key, lineno, str(e)))
    return out, damage, partial


def parse_system_file(data: bytes, key: str) -> Parsed:
    def decode(line: str) -> SystemRecord:
        return _system_record(json.loads(line))

    records, damage, partial = _parse_lines(_lines(data), key, decode)
    return Parsed(records, damage, partial)


# ---- trace files ---------------------------------------------------------------------------------
class _TraceState:
    """Per-file state: the start time (pid-0 metadata) and the phase (process) names."""

    def __init__(self, node: str, source: str) -> None:
        self.node = node
        self.source = source
        self.base_us = 0
        self.processes: dict[int, str] = {}

    def add(self, event: object, out: list[TraceEvent]) -> None:
        if not isinstance(event, dict):
            raise ValueError("trace event is not a JSON object")
        ph = event.get("ph")
        if ph == "M":
            args = event.get("args") or {}
            if event.get("name") == "process_name" and isinstance(args, dict):
                if _is_number(args.get("start_time_since_epoch_in_micros")):
                    self.base_us = int(args["start_time_since_epoch_in_micros"])
                if isinstance(args.get("name"), str):
                    self.processes[int(event.get("pid", 0))] = args["name"]
        elif ph == "X":
            ts, dur = event.get("ts"), event.get("dur", 0)
            if not (_is_number(ts) and _is_number(dur)):
                raise ValueError("complete event without numeric ts/dur")
            ts, dur = cast(float, ts), cast(float, dur)
            name = event.get("name")
            if not isinstance(name, str):
                raise ValueError("complete event without a name")
            pid = int(event.get("pid", 0))
            tid = event.get("tid", 0)
            start = self.base_us + int(round(ts))
            args = event.get("args")
            out.append(TraceEvent(name, self.processes.get(pid, "Unknown"), start, start + int(round(dur)),
                                  pid, tid if isinstance(tid, int) else 0, self.node,
                                  args if isinstance(args, dict) else None, self.source))
        # Other phases (B/E pairs of Horovod timelines, instant and counter events) are not used
        # by the profiler rules and are skipped.


def _strip_array_line(line: str) -> str | None:
    """The JSON of one array element line, or None for the brackets."""
    s = line.strip()
    if s in ("[", "]"):
        return None
    return s[:-1] if s.endswith(",") else s


def parse_trace_file(data: bytes, key: str, node: str, source: str = "") -> Parsed:
    """`source`: the file's kind (its name's suffix), kept on each event."""
    lines = _lines(data)
    line_damage: list[Damage] | None = None
    if lines and lines[0][1].strip() == "[":
        state = _TraceState(node, source)
        events: list[TraceEvent] = []

        def decode(line: str) -> None:
            s = _strip_array_line(line)
            if s is not None:
                state.add(json.loads(s), events)

        _, line_damage, partial = _parse_lines(lines[1:], key, decode)
        if not line_damage:
            return Parsed(events, [], partial)
        line_result = Parsed(events, line_damage, partial)
    # Not one event per line (or damaged in the middle): read it as one JSON document.
    try:
        doc = json.loads(data)
    except ValueError as e:
        if line_damage is not None:
            return line_result  # damage found line by line, with its line numbers
        return Parsed([], [Damage(key, getattr(e, "lineno", 0), f"not a JSON trace: {e}")], False)
    if isinstance(doc, dict):
        doc = doc.get("traceEvents")
    if not isinstance(doc, list):
        return Parsed([], [Damage(key, 0, "not a JSON array of trace events")], False)
    state = _TraceState(node, source)
    out: list[TraceEvent] = []
    damage = []
    for i, event in enumerate(doc):
        try:
            state.add(event, out)
        except (ValueError, TypeError) as e:
            damage.append(Damage(key, 0, f"event {i}: {e}"))
    return Parsed(out, damage, False)
