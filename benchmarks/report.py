"""Turns raw run records into medians, overheads, ratios, verdicts and a markdown report."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

RATIO_TARGET = 2.0  # smdebug's overhead / ours, at every interval
OURS_MAX_OVERHEAD = 0.05  # at the largest interval (100 in the full run)
READ_RATIO_TARGET = 3.0  # smdebug's read time / ours
CHECKSUM_REL_TOL = 1e-9
NOISY_SPREAD = 0.15  # baseline runs further apart than this: the machine was busy, say so

Record = Mapping[str, Any]


def median_of(records: Iterable[Record], key: str) -> float | None:
    values = [float(r[key]) for r in records]
    return statistics.median(values) if values else None


def min_of(records: Iterable[Record], key: str) -> float | None:
    values = [float(r[key]) for r in records]
    return min(values) if values else None


def spread(values: Sequence[float]) -> float | None:
    """(max - min) / median: how far apart repeated runs of one configuration landed."""
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / statistics.median(values)


def overhead(hooked: float | None, baseline: float | None) -> float | None:
    if hooked is None or baseline is None or baseline <= 0:
        return None
    return (hooked - baseline) / baseline


def overhead_ratio(smdebug_overhead: float | None, ours_overhead: float | None) -> float | None:
    """smdebug's overhead / ours; +inf when ours is at or below the baseline while smdebug's is not;
    None when it cannot be told (a side missing, or both within noise of their baselines)."""
    if smdebug_overhead is None or ours_overhead is None:
        return None
    if ours_overhead <= 0:
        return math.inf if smdebug_overhead > 0 else None
    return smdebug_overhead / ours_overhead


def _select(runs: Iterable[Record], variant: str, interval: int | None = None) -> list[Record]:
    return [r for r in runs if r["variant"] == variant and (interval is None or r["interval"] == interval)]


def _paired_overhead(runs: Sequence[Record], variant: str, baseline: str, interval: int, key: str) -> float | None:
    """Median over rounds of (hooked / baseline of the same round) - 1: robust to slow drifts of load."""
    per_round = []
    for hooked in _select(runs, variant, interval):
        base = [r for r in _select(runs, baseline) if r["round"] == hooked["round"]]
        if base:
            per_round.append(float(hooked[key]) / float(base[0][key]) - 1.0)
    return statistics.median(per_round) if per_round else None


def _paired_ratio(runs: Sequence[Record], variant: str, other: str, interval: int, key: str) -> float | None:
    """Median over rounds of variant / other - 1, both at `interval` in the same round."""
    per_round = []
    for mine in _select(runs, variant, interval):
        theirs = [r for r in _select(runs, other, interval) if r["round"] == mine["round"]]
        if theirs:
            per_round.append(float(mine[key]) / float(theirs[0][key]) - 1.0)
    return statistics.median(per_round) if per_round else None


def _checkout_rows(runs: Sequence[Record], intervals: Sequence[int]) -> list[dict[str, Any]]:
    """`--baseline-root`: our hook of this checkout beside the other checkout's, per interval."""
    rows = []
    for interval in intervals:
        row: dict[str, Any] = {"interval": interval}
        for key, suffix in (("step_ms", ""), ("cpu_step_ms", "_cpu")):
            row[f"this{suffix}_ms"] = median_of(_select(runs, "ours", interval), key)
            row[f"checkout{suffix}_ms"] = median_of(_select(runs, "ours-baseline", interval), key)
            row[f"paired{suffix}"] = _paired_ratio(runs, "ours", "ours-baseline", interval, key)
        row["this_faults"] = median_of(_select(runs, "ours", interval), "minor_faults_per_step")
        row["checkout_faults"] = median_of(_select(runs, "ours-baseline", interval), "minor_faults_per_step")
        rows.append(row)
    return rows


def summarize_training(runs: Sequence[Record], intervals: Sequence[int]) -> dict[str, Any]:
    base_ours = _select(runs, "none-ours")
    base_smdebug = _select(runs, "none-smdebug")
    summary: dict[str, Any] = {
        "baseline_ours_ms": median_of(base_ours, "step_ms"),
        "baseline_smdebug_ms": median_of(base_smdebug, "step_ms"),
        "baseline_ours_cpu_ms": median_of(base_ours, "cpu_step_ms"),
        "baseline_smdebug_cpu_ms": median_of(base_smdebug, "cpu_step_ms"),
        "baseline_ours_spread": spread([r["step_ms"] for r in base_ours]),
        "baseline_smdebug_spread": spread([r["step_ms"] for r in base_smdebug]),
        "intervals": [],
    }
    spreads = [x for x in (summary["baseline_ours_spread"], summary["baseline_smdebug_spread"]) if x is not None]
    summary["noisy"] = bool(spreads) and max(spreads) > NOISY_SPREAD
    largest = max(intervals)
    for interval in intervals:
        row: dict[str, Any] = {"interval": interval}
        for key, suffix in (("step_ms", ""), ("cpu_step_ms", "_cpu")):
            ours_ms = median_of(_select(runs, "ours", interval), key)
            smdebug_ms = median_of(_select(runs, "smdebug", interval), key)
            ours_oh = overhead(ours_ms, summary[f"baseline_ours{suffix}_ms"])
            smdebug_oh = overhead(smdebug_ms, summary[f"baseline_smdebug{suffix}_ms"])
            ratio = overhead_ratio(smdebug_oh, ours_oh)
            row.update({
                f"ours{suffix}_ms": ours_ms,
                f"smdebug{suffix}_ms": smdebug_ms,
                f"ours{suffix}_overhead": ours_oh,
                f"smdebug{suffix}_overhead": smdebug_oh,
                f"ratio{suffix}": ratio,
                f"ratio{suffix}_verdict": _verdict(None if smdebug_oh is None else ratio, RATIO_TARGET, smdebug_oh),
            })
            if interval == largest:
                row[f"ours{suffix}_max_verdict"] = (
                    "n/a" if ours_oh is None else ("PASS" if ours_oh < OURS_MAX_OVERHEAD else "FAIL")
                )
        # Lower envelope: the fastest run of each configuration. Other processes only ever slow a
        # run down, so on a shared machine min() estimates the intrinsic cost with less noise.
        ours_min = min_of(_select(runs, "ours", interval), "step_ms")
        smdebug_min = min_of(_select(runs, "smdebug", interval), "step_ms")
        row["ours_overhead_min"] = overhead(ours_min, min_of(base_ours, "step_ms"))
        row["smdebug_overhead_min"] = overhead(smdebug_min, min_of(base_smdebug, "step_ms"))
        row["ratio_min"] = overhead_ratio(row["smdebug_overhead_min"], row["ours_overhead_min"])
        row["ratio_min_verdict"] = _verdict(None if row["smdebug_overhead_min"] is None else row["ratio_min"],
                                            RATIO_TARGET, row["smdebug_overhead_min"])
        if interval == largest:
            row["ours_min_max_verdict"] = (
                "n/a" if row["ours_overhead_min"] is None
                else ("PASS" if row["ours_overhead_min"] < OURS_MAX_OVERHEAD else "FAIL")
            )
        row["ours_paired_overhead"] = _paired_overhead(runs, "ours", "none-ours", interval, "step_ms")
        row["smdebug_paired_overhead"] = _paired_overhead(runs, "smdebug", "none-smdebug", interval, "step_ms")
        summary["intervals"].append(row)
    if _select(runs, "ours-baseline"):
        summary["checkout"] = _checkout_rows(runs, intervals)
    return summary


def _verdict(ratio: float | None, target: float, smdebug_overhead: float | None) -> str:
    if smdebug_overhead is None:
        return "n/a"  # smdebug side not run
    if ratio is None:
        return "n/a (both within noise)"
    return "PASS" if ratio >= target else "FAIL"


def summarize_reading(runs: Sequence[Record]) -> dict[str, Any]:
    summary: dict[str, Any] = {}
    for variant in ("ours", "bytes", "smdebug", "smdebug-nodelay"):
        chosen = _select(runs, variant)
        key = variant.replace("-", "_")
        summary[f"{key}_s"] = median_of(chosen, "total_s")
        summary[f"{key}_open_s"] = median_of(chosen, "open_s")
        summary[f"{key}_cpu_s"] = median_of(chosen, "cpu_s")
    ours_s = summary["ours_s"]
    summary["values"] = runs[0]["values"] if runs else None
    for key in ("smdebug", "smdebug_nodelay"):
        theirs = summary[f"{key}_s"]
        ratio = theirs / ours_s if ours_s and theirs is not None else None
        summary[f"ratio_{key}"] = ratio
        summary[f"verdict_{key}"] = "n/a" if ratio is None else ("PASS" if ratio >= READ_RATIO_TARGET else "FAIL")
    theirs_cpu, ours_cpu = summary["smdebug_nodelay_cpu_s"], summary["ours_cpu_s"]
    summary["cpu_ratio"] = theirs_cpu / ours_cpu if ours_cpu and theirs_cpu is not None else None
    return summary


def check_same_read(runs: Sequence[Record]) -> str | None:
    """None when every reader run read the same number of values with the same checksum, else why not."""
    if not runs:
        return None
    first = runs[0]
    for run in runs[1:]:
        if run["values"] != first["values"] or run["elements"] != first["elements"]:
            return (f"{run['variant']} read {run['values']} values / {run['elements']} elements,"
                    f" {first['variant']} read {first['values']} / {first['elements']}")
        if not math.isclose(run["checksum"], first["checksum"], rel_tol=CHECKSUM_REL_TOL, abs_tol=1e-6):
            return f"checksums differ: {run['variant']} {run['checksum']!r} vs {first['variant']} {first['checksum']!r}"
    return None


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f}%"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _ratio(value: float | None) -> str:
    if value is None:
        return "n/a"
    return "∞ (ours ≤ baseline)" if math.isinf(value) else f"{value:.1f}×"


def _training_lines(t: Mapping[str, Any], loadavg: Sequence[float]) -> list[str]:
    lines = [
        f"No hook: {_ms(t['baseline_ours_ms'])} ms/step (system python),"
        f" {_ms(t['baseline_smdebug_ms'])} ms/step (smdebug venv); run-to-run spread of the baseline"
        f" {_pct(t['baseline_ours_spread'])} / {_pct(t['baseline_smdebug_spread'])}.",
        "",
    ]
    if t.get("noisy"):
        lines += [
            f"**Noisy machine**: baseline runs differ by more than {100 * NOISY_SPREAD:.0f}% (load average"
            f" {', '.join(f'{x:.1f}' for x in loadavg)}); median verdicts are indicative only. The lower-envelope"
            " table is the better guide; rerun on a quiet machine for the medians.",
            "",
        ]
    lines += [
        "Wall time per step (what training feels):",
        "",
        "| save_interval | ours ms/step | smdebug ms/step | ours overhead | smdebug overhead"
        " | smdebug / ours overhead | ≥2× lower | ours < 5% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in t["intervals"]:
        lines.append(
            f"| {row['interval']} | {_ms(row['ours_ms'])} | {_ms(row['smdebug_ms'])}"
            f" | {_pct(row['ours_overhead'])} | {_pct(row['smdebug_overhead'])} | {_ratio(row['ratio'])}"
            f" | {row['ratio_verdict']} | {row.get('ours_max_verdict', '')} |"
        )
    lines += [
        "",
        "Same runs, lower envelope (fastest run of each configuration; other processes only slow runs down):",
        "",
        "| save_interval | ours overhead | smdebug overhead | smdebug / ours overhead | ≥2× lower | ours < 5% |",
        "|---|---|---|---|---|---|",
    ]
    for row in t["intervals"]:
        lines.append(
            f"| {row['interval']} | {_pct(row['ours_overhead_min'])} | {_pct(row['smdebug_overhead_min'])}"
            f" | {_ratio(row['ratio_min'])} | {row['ratio_min_verdict']} | {row.get('ours_min_max_verdict', '')} |"
        )
    lines += [
        "",
        "CPU time per step, all threads of the process (the work each hook adds, background writer included;"
        " medians; in a VM, time stolen by other guests counts too):",
        "",
        "| save_interval | ours CPU ms/step | smdebug CPU ms/step | ours overhead | smdebug overhead"
        " | smdebug / ours overhead | ≥2× lower | ours < 5% |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in t["intervals"]:
        lines.append(
            f"| {row['interval']} | {_ms(row['ours_cpu_ms'])} | {_ms(row['smdebug_cpu_ms'])}"
            f" | {_pct(row['ours_cpu_overhead'])} | {_pct(row['smdebug_cpu_overhead'])} | {_ratio(row['ratio_cpu'])}"
            f" | {row['ratio_cpu_verdict']} | {row.get('ours_cpu_max_verdict', '')} |"
        )
    lines += [
        "",
        f"No-hook CPU time: {_ms(t['baseline_ours_cpu_ms'])} / {_ms(t['baseline_smdebug_cpu_ms'])} ms/step."
        " Wall overhead paired per round (median of hooked/baseline − 1 within a round): "
        + ", ".join(
            f"interval {row['interval']}: ours {_pct(row['ours_paired_overhead'])},"
            f" smdebug {_pct(row['smdebug_paired_overhead'])}"
            for row in t["intervals"]
        )
        + ".",
        "",
    ]
    if t.get("checkout"):
        lines += [
            "This checkout's hook beside `--baseline-root`'s (same rounds, same no-hook runs; paired ="
            " median over rounds of this / baseline − 1 at the same interval in the same round):",
            "",
            "| save_interval | this ms/step | baseline ms/step | paired wall | this CPU ms/step"
            " | baseline CPU ms/step | paired CPU | page faults/step this / baseline |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row in t["checkout"]:
            lines.append(
                f"| {row['interval']} | {_ms(row['this_ms'])} | {_ms(row['checkout_ms'])} | {_pct(row['paired'])}"
                f" | {_ms(row['this_cpu_ms'])} | {_ms(row['checkout_cpu_ms'])} | {_pct(row['paired_cpu'])}"
                f" | {_ms(row['this_faults'])} / {_ms(row['checkout_faults'])} |")
        lines.append("")
    return lines


def _reading_lines(read: Mapping[str, Any], repeats: int) -> list[str]:
    r = read["summary"]
    return [
        f"Reading every value of every tensor at every step ({r['values']} values,"
        f" {read['trial_steps']} steps written by {read['trial_writer']}'s hook), trial open included,"
        f" fresh process each, median of {repeats}; same values and checksum for every reader:"
        f" {'yes' if read['same_data'] else 'NO'}.",
        "",
        "| reader | wall s | of which open | CPU s | smdebug / ours (wall) | ≥3× |",
        "|---|---|---|---|---|---|",
        f"| ours | {_ms(r['ours_s'])} | {_ms(r['ours_open_s'])} | {_ms(r['ours_cpu_s'])} | | |",
        f"| (floor: the records' bytes only, into fresh memory, no decoding) | {_ms(r.get('bytes_s'))} | |"
        f" {_ms(r.get('bytes_cpu_s'))} | | |",
        f"| smdebug 1.0.34, as users get it | {_ms(r['smdebug_s'])} | {_ms(r['smdebug_open_s'])}"
        f" | {_ms(r['smdebug_cpu_s'])} | {_ratio(r['ratio_smdebug'])} | {r['verdict_smdebug']} |",
        f"| smdebug 1.0.34, SMDEBUG_TRAINING_END_DELAY_REFRESH=0 | {_ms(r['smdebug_nodelay_s'])}"
        f" | {_ms(r['smdebug_nodelay_open_s'])} | {_ms(r['smdebug_nodelay_cpu_s'])}"
        f" | {_ratio(r['ratio_smdebug_nodelay'])} | {r['verdict_smdebug_nodelay']} |",
        "",
        "smdebug sleeps 1 s (SMDEBUG_TRAINING_END_DELAY_REFRESH) when it first sees the end-of-training"
        " marker, whatever the trial's size; the last row is its reading work alone"
        f" (CPU smdebug / ours: {_ratio(r['cpu_ratio'])}). The floor row reads the same byte ranges and"
        " decodes nothing: in a fresh process, first-touch page faults of the kept values dominate,"
        " whatever the reader.",
        "",
    ]


def markdown(results: Mapping[str, Any]) -> str:
    s = results["settings"]
    machine = results["machine"]
    lines = [
        f"Benchmark ({s['mode']} mode): MLP 512→1024→512→10 (1,055,242 parameters), batch 64, CPU,"
        f" torch.set_num_threads(1) in every variant so the hook's background writer gets the other core"
        f" ({machine['cpus']} CPUs here). Saving weights, biases, gradients and losses."
        f" {s['steps']} timed steps after {s['warmup']} warm-up steps, median of {s['repeats']} runs per"
        f" configuration, configurations interleaved in a shuffled order each round; the time includes"
        f" `hook.close()` (draining the writer). Trials written to {machine['work_dir_kind']}."
        f" Overhead = (hooked − baseline) / baseline against the no-hook run on the same interpreter."
        + (" glibc malloc thresholds pinned in every variant (MALLOC_MMAP_THRESHOLD_=64 MiB,"
           " MALLOC_TRIM_THRESHOLD_=256 MiB): with the defaults, per-step page faults made no-hook runs"
           " vary by ±25%." if isinstance(machine.get("malloc"), dict) else ""),
        "",
    ]
    loadavg = machine.get("loadavg_end") or machine.get("loadavg_start") or ()
    if results.get("training"):
        lines += _training_lines(results["training"]["summary"], loadavg)
    if results.get("reading"):
        lines += _reading_lines(results["reading"], s["read_repeats"])
    return "\n".join(lines)
