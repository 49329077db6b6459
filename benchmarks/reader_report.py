"""The reader benchmark's runs turned into medians, ratios, throughputs, verdicts and markdown."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

SMALL_RATIO_TARGET = 10.0  # smdebug's reading time / ours, many small tensors
LARGE_GBPS_TARGET = 2.0  # ours (own reader and through smdebug's API), large tensors, GB/s (10^9 bytes/s)
CHECKSUM_REL_TOL = 1e-9
NOISY_SPREAD = 0.25  # (max - min) / median of one reader's runs on one trial beyond this: say so
# smdebug-fast: smdebug 1.0.34 in a second side virtualenv on a compiled protobuf: upb (protobuf
# >= 4.21, smdebug's generated modules rewritten by benchmarks/smdebug_upb.py), or protobuf 3.20.3's
# C++ extension on Python 3.10 (smdebug pins protobuf<=3.20.3, which has no compiled wheel for 3.11)
READERS = ("ours", "facade", "ours-baseline", "smdebug", "smdebug-fast")

Record = Mapping[str, Any]


def check_same_values(runs: Sequence[Record]) -> str | None:
    """None when, trial by trial, every run read the same values (count, elements, checksum)."""
    first: dict[tuple[str, str], Record] = {}
    for run in runs:
        key = (run["workload"], run["writer"])
        ref = first.setdefault(key, run)
        where = f"{run['workload']} trial written by {run['writer']}"
        if (run["values"], run["elements"]) != (ref["values"], ref["elements"]):
            return (f"{where}: {run['variant']} read {run['values']} values / {run['elements']} elements,"
                    f" {ref['variant']} {ref['values']} / {ref['elements']}")
        if not math.isclose(run["checksum"], ref["checksum"], rel_tol=CHECKSUM_REL_TOL, abs_tol=1e-6):
            return f"{where}: checksums differ: {run['variant']} {run['checksum']!r}, {ref['variant']} {ref['checksum']!r}"
    return None


def _ratio(theirs: float | None, ours: float | None) -> float | None:
    return theirs / ours if theirs is not None and ours else None


def summarize(runs: Sequence[Record]) -> list[dict[str, Any]]:
    """One row per trial (workload, writer): per reader the median and fastest reading time, its
    CPU time, what it slept (taken out), GB/s; then smdebug's time / ours and the verdict."""
    rows = []
    for key in dict.fromkeys((r["workload"], r["writer"]) for r in runs):
        workload, writer = key
        chosen = [r for r in runs if (r["workload"], r["writer"]) == key]
        row: dict[str, Any] = {"workload": workload, "writer": writer, "values": chosen[0]["values"],
                               "bytes": chosen[0]["bytes"], "rounds": max(r["round"] for r in chosen) + 1}
        for reader in READERS:
            mine = [r for r in chosen if r["variant"] == reader]
            if not mine:
                continue
            median_s = statistics.median(r["read_s"] for r in mine)
            min_s = min(r["read_s"] for r in mine)
            max_s = max(r["read_s"] for r in mine)
            row[reader] = {
                "spread": (max_s - min_s) / median_s if median_s > 0 else None,
                "median_s": median_s,
                "min_s": min_s,
                "cpu_s": statistics.median(r["cpu_s"] for r in mine),
                "open_s": statistics.median(r["open_s"] for r in mine),
                "slept_s": statistics.median(r["slept_s"] for r in mine),
                "as_shipped_s": statistics.median(r["total_s"] for r in mine),
                "gbps_median": row["bytes"] / median_s / 1e9 if median_s > 0 else None,
                "gbps_best": row["bytes"] / min_s / 1e9 if min_s > 0 else None,
                # per second of the reader's CPU time: what the load of a shared machine cannot inflate
                "gbps_cpu": (row["bytes"] / statistics.median(r["cpu_s"] for r in mine) / 1e9
                             if statistics.median(r["cpu_s"] for r in mine) > 0 else None),
                "protobuf": mine[0].get("protobuf"),
                "minor_faults": (statistics.median(r["minor_faults"] for r in mine)
                                 if all("minor_faults" in r for r in mine) else None),
            }
            if all("use_s" in r for r in mine):  # reading, then the first pass over every value
                with_use = [r["read_s"] + r["use_s"] for r in mine]
                row[reader].update(read_use_median_s=statistics.median(with_use),
                                   gbps_use_median=row["bytes"] / statistics.median(with_use) / 1e9,
                                   gbps_use_best=row["bytes"] / min(with_use) / 1e9)
        ours, theirs = row.get("ours"), row.get("smdebug")
        if ours and theirs:
            # per round, the two readers ran back to back: their ratio is less exposed to the
            # machine's load changing between rounds than the ratio of the two medians
            paired = [_ratio(t["read_s"], o["read_s"]) for o in chosen if o["variant"] == "ours"
                      for t in chosen if t["variant"] == "smdebug" and t["round"] == o["round"]]
            row["ratio_paired"] = statistics.median(r for r in paired if r is not None) if paired else None
            row["ratio_median"] = _ratio(theirs["median_s"], ours["median_s"])
            row["ratio_min"] = _ratio(theirs["min_s"], ours["min_s"])
            row["ratio_cpu"] = _ratio(theirs["cpu_s"], ours["cpu_s"])
            row["ratio_as_shipped"] = _ratio(theirs["as_shipped_s"], ours["as_shipped_s"])
        facade = row.get("facade")
        if facade and theirs:  # sdlocal read through smdebug's API (smdebug.trials.create_trial)
            paired = [_ratio(t["read_s"], o["read_s"]) for o in chosen if o["variant"] == "facade"
                      for t in chosen if t["variant"] == "smdebug" and t["round"] == o["round"]]
            row["facade_ratio_paired"] = statistics.median(r for r in paired if r is not None) if paired else None
        fast = row.get("smdebug-fast")
        if ours and fast:
            paired = [_ratio(t["read_s"], o["read_s"]) for o in chosen if o["variant"] == "ours"
                      for t in chosen if t["variant"] == "smdebug-fast" and t["round"] == o["round"]]
            row["fast_ratio_paired"] = statistics.median(r for r in paired if r is not None) if paired else None
            row["fast_ratio_median"] = _ratio(fast["median_s"], ours["median_s"])
            row["fast_ratio_cpu"] = _ratio(fast["cpu_s"], ours["cpu_s"])
        if ours and row.get("ours-baseline"):
            row["speedup_vs_baseline"] = _ratio(row["ours-baseline"]["median_s"], ours["median_s"])
        row["verdict"] = _verdict(row)
        rows.append(row)
    return rows


def _verdict(row: Mapping[str, Any]) -> str:
    """On the slower of our two ways in (own reader, smdebug's API), where both ran."""
    if row["workload"] == "small":
        ratios = [r for r in (row.get("ratio_paired"), row.get("facade_ratio_paired")) if r is not None]
        return "n/a" if not ratios else ("PASS" if min(ratios) >= SMALL_RATIO_TARGET else "FAIL")
    speeds = [row[r]["gbps_median"] for r in ("ours", "facade") if row.get(r)]
    return "n/a" if not speeds else ("PASS" if min(speeds) >= LARGE_GBPS_TARGET else "FAIL")


def _s(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}×"


def _gb(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def _n(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _cell(row: Mapping[str, Any], reader: str, key: str, fmt: Any) -> str:
    return fmt(row[reader][key]) if row.get(reader) else "n/a"


def markdown(results: Mapping[str, Any]) -> str:
    s, machine, rows = results["settings"], results["machine"], results["summary"]
    has_baseline = any(r.get("ours-baseline") for r in rows)
    has_fast = any(r.get("smdebug-fast") for r in rows)
    has_facade = any(r.get("facade") for r in rows)
    has_use = any(r.get("ours", {}).get("gbps_use_median") for r in rows)
    has_faults = any(r.get("ours", {}).get("minor_faults") is not None for r in rows)
    protobufs = {reader: r[reader]["protobuf"] for r in rows for reader in ("smdebug", "smdebug-fast")
                 if r.get(reader) and r[reader].get("protobuf")}
    lines = [
        f"Reader benchmark ({s['mode']} mode, {machine['cpus']} CPUs, trials on {machine['work_dir_kind']}):"
        f" every value of every tensor at every step, each reader in a fresh process, {s['rounds']} round(s)"
        " (median / fastest). Timed: create_trial + tensor_names + every value; not timed: the"
        " interpreter's start, imports, and smdebug's sleep of SMDEBUG_TRAINING_END_DELAY_REFRESH (1 s)"
        " once it sees the end-of-training marker (each `time.sleep` is timed and taken out; the"
        " 'as shipped' column keeps it). Same values and checksum for every reader of a trial: yes."
        + ("".join(f" {reader} parsed with protobuf {impl}." for reader, impl in protobufs.items()))
        + (" Readers ran without transparent huge pages (--no-huge-pages: fresh memory in 4 KiB pages)."
           if machine.get("huge_pages") is False else ""),
        "",
        "Many small tensors (target: smdebug's time ≥ 10× ours; the verdict uses the paired ratio, the"
        " median over rounds of smdebug's time ÷ ours in the same round):",
        "",
        "| trial written by | values | ours s (median / fastest) | "
        + ("ours before s | " if has_baseline else "")
        + "smdebug s (median / fastest) | smdebug ÷ ours: paired / medians / fastest | CPU | as shipped |"
        + (" via smdebug API s (median) / smdebug ÷ it, paired |" if has_facade else "") + " ≥10× |"
        + (" smdebug-fast s (median / fastest) | smdebug-fast ÷ ours: paired / CPU |" if has_fast else ""),
        "|---|---|---|" + ("---|" if has_baseline else "") + "---|---|---|---|" + ("---|" if has_facade else "")
        + "---|" + ("---|---|" if has_fast else ""),
    ]
    for row in (r for r in rows if r["workload"] == "small"):
        lines.append(
            f"| {row['writer']} | {row['values']} | {_cell(row, 'ours', 'median_s', _s)} / {_cell(row, 'ours', 'min_s', _s)}"
            + (f" | {_cell(row, 'ours-baseline', 'median_s', _s)}" if has_baseline else "")
            + f" | {_cell(row, 'smdebug', 'median_s', _s)} / {_cell(row, 'smdebug', 'min_s', _s)}"
            f" | {_x(row.get('ratio_paired'))} / {_x(row.get('ratio_median'))} / {_x(row.get('ratio_min'))}"
            f" | {_x(row.get('ratio_cpu'))}"
            f" | {_x(row.get('ratio_as_shipped'))} |"
            + (f" {_cell(row, 'facade', 'median_s', _s)} / {_x(row.get('facade_ratio_paired'))} |" if has_facade else "")
            + f" {row['verdict']} |"
            + (f" {_cell(row, 'smdebug-fast', 'median_s', _s)} / {_cell(row, 'smdebug-fast', 'min_s', _s)}"
               f" | {_x(row.get('fast_ratio_paired'))} / {_x(row.get('fast_ratio_cpu'))} |" if has_fast else "")
        )
    large = [r for r in rows if r["workload"] == "large"]
    if large:
        mib = s["large_rows"] * s["large_cols"] * 4 / (1 << 20)
        lines += [
            "",
            f"Large tensors ({mib:.0f} MiB float32 each, {s['large_steps']} per trial; GB/s = 10⁹ bytes of values"
            f" per second of reading; target: ours ≥ {LARGE_GBPS_TARGET:g} GB/s, by our own reader and through"
            " smdebug's API, `smdebug.trials.create_trial(...).tensor(name).value(step)`):",
            "",
            "| trial written by | ours GB/s (median / best) | "
            + ("via smdebug API GB/s (median / best) | " if has_facade else "")
            + ("ours before GB/s | " if has_baseline else "")
            + f"smdebug GB/s (median / best) | smdebug ÷ ours time | ≥{LARGE_GBPS_TARGET:g} GB/s |"
            + (" read + first use GB/s: ours" + (" / before" if has_baseline else "") + " (median / best) |"
               if has_use else "")
            + " per CPU second: ours" + (" / via API" if has_facade else "") + " / smdebug |"
            + (" smdebug-fast GB/s (median) |" if has_fast else "")
            + (" page faults while reading: ours" + (" / before" if has_baseline else "") + " |" if has_faults else ""),
            "|---|---|" + ("---|" if has_facade else "") + ("---|" if has_baseline else "") + "---|---|---|"
            + ("---|" if has_use else "") + "---|"
            + ("---|" if has_fast else "") + ("---|" if has_faults else ""),
        ]
        for row in large:
            lines.append(
                f"| {row['writer']} | {_cell(row, 'ours', 'gbps_median', _gb)} / {_cell(row, 'ours', 'gbps_best', _gb)}"
                + (f" | {_cell(row, 'facade', 'gbps_median', _gb)} / {_cell(row, 'facade', 'gbps_best', _gb)}"
                   if has_facade else "")
                + (f" | {_cell(row, 'ours-baseline', 'gbps_median', _gb)}" if has_baseline else "")
                + f" | {_cell(row, 'smdebug', 'gbps_median', _gb)} / {_cell(row, 'smdebug', 'gbps_best', _gb)}"
                f" | {_x(row.get('ratio_median'))} | {row['verdict']} |"
                + (f" {_cell(row, 'ours', 'gbps_use_median', _gb)} / {_cell(row, 'ours', 'gbps_use_best', _gb)}"
                   + (f"; {_cell(row, 'ours-baseline', 'gbps_use_median', _gb)} /"
                      f" {_cell(row, 'ours-baseline', 'gbps_use_best', _gb)}" if has_baseline else "") + " |"
                   if has_use else "")
                + f" {_cell(row, 'ours', 'gbps_cpu', _gb)}"
                + (f" / {_cell(row, 'facade', 'gbps_cpu', _gb)}" if has_facade else "")
                + f" / {_cell(row, 'smdebug', 'gbps_cpu', _gb)} |"
                + (f" {_cell(row, 'smdebug-fast', 'gbps_median', _gb)} |" if has_fast else "")
                + (f" {_cell(row, 'ours', 'minor_faults', _n)}"
                   + (f" / {_cell(row, 'ours-baseline', 'minor_faults', _n)}" if has_baseline else "") + " |"
                   if has_faults else "")
            )
    spreads = [r[reader]["spread"] for r in rows for reader in READERS if r.get(reader) and r[reader]["spread"]]
    if spreads and max(spreads) > NOISY_SPREAD:
        load = machine.get("loadavg_end") or machine.get("loadavg_start") or ()
        lines += ["", f"**Noisy machine**: runs of one reader on one trial differ by up to {100 * max(spreads):.0f}%"
                  f" of their median (load average {', '.join(f'{x:.1f}' for x in load)}); the paired ratios"
                  " and the fastest runs are the better guide."]
    load = machine.get("loadavg_end") or machine.get("loadavg_start") or ()
    if load:
        lines += ["", f"Load average at the end: {', '.join(f'{x:.1f}' for x in load)} ({machine['cpus']} CPUs)."]
    slept = [r["smdebug"]["slept_s"] for r in rows if r.get("smdebug")]
    if slept:
        lines += ["", f"smdebug slept {min(slept):.2f}–{max(slept):.2f} s per read (median per trial), not counted above."]
    if has_baseline:
        lines += ["", f"'ours before': the reader of {machine['baseline_root']}."]
    return "\n".join(lines) + "\n"
