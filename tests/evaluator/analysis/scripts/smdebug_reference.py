"""Run by the REAL smdebug 1.0.34 (its side virtualenv): the analysis calls of smdebug's profiling
notebooks on a job's profiler folder, printed as JSON for tests/evaluator/analysis to compare.

    python smdebug_reference.py <profiler folder>
"""
import json
import sys
import warnings

warnings.filterwarnings("ignore")

import pandas as pd  # noqa: E402
from smdebug.profiler.algorithm_metrics_reader import LocalAlgorithmMetricsReader  # noqa: E402
from smdebug.profiler.analysis.utils.pandas_data_analysis import PandasFrameAnalysis, StatsBy  # noqa: E402
from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame  # noqa: E402
from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader  # noqa: E402

path = sys.argv[1]
out = {}
system_reader, framework_reader = LocalSystemMetricsReader(path), LocalAlgorithmMetricsReader(path)
last = system_reader.get_timestamp_of_latest_available_file()
events = system_reader.get_events(0, last)
out["system_reader"] = {"first": system_reader.get_timestamp_of_first_available_file(), "latest": last,
                        "events": len(events), "cpu_events": len(system_reader.get_events(0, last, event_type="cpu")),
                        "sample": sorted([e.type, e.name, e.dimension, e.value, e.node_id, e.timestamp] for e in events)}
fw_last = framework_reader.get_timestamp_of_latest_available_file()
fw_events = framework_reader.get_events(0, fw_last)
out["framework_reader"] = {
    "latest": fw_last, "events": len(fw_events), "step_interval": list(framework_reader._get_time_interval_for_step(1, 10)),
    "sample": sorted([e.event_name, e.event_phase, e.start_time, e.end_time, e.duration, e.node_id, e.pid, e.phase,
                      e.file_type, e.event_args] for e in fw_events)}

pf = PandasFrame(path)
system_df = pf.get_all_system_metrics()
framework_df = pf.get_all_framework_metrics()
steps_df = pf.get_all_framework_metrics(selected_framework_metrics=["Step:ModeKeys.TRAIN", "Step:ModeKeys.GLOBAL"])
out["start_time"] = pf.start_time
out["system_df"] = {"columns": list(system_df.columns), "rows": system_df.values.tolist()}
out["framework_df"] = {"columns": list(framework_df.columns), "rows": framework_df.values.tolist()}
out["steps_df_rows"] = len(steps_df)

analysis = PandasFrameAnalysis(system_df.copy(), framework_df.copy())
stats = analysis.get_job_statistics()
stats = {k: (v.iloc[0] if isinstance(v, pd.Series) else v) for k, v in stats.__dict__.items()}
out["job_statistics"] = {k: (v.item() if hasattr(v, "item") else v) for k, v in stats.items()}
step_stats = analysis.get_step_statistics(by=StatsBy.TRAINING_PHASE)
out["step_statistics"] = {"columns": list(step_stats.columns), "rows": step_stats.values.tolist()}
util = analysis.get_utilization_stats()
out["utilization"] = {"columns": list(util.columns), "rows": util.values.tolist()}
out["phase_intervals"] = analysis.get_training_phase_intervals().values.tolist()
# CPU/GPU utilization of the utilization series only (sdlocal's fix: smdebug mixed in I/O wait)
utilization_only = system_df[~system_df["dimension"].isin(["I/OWaitPercentage", "GPUMemoryUtilization"])]
fixed = PandasFrameAnalysis(utilization_only.copy(), framework_df.copy())
util = fixed.get_utilization_stats()
out["utilization_only"] = {"columns": list(util.columns), "rows": util.values.tolist()}
util = fixed.get_utilization_stats(by=StatsBy.TRAINING_PHASE)
out["utilization_by_phase_only"] = {"columns": list(util.columns), "rows": util.values.tolist()}
usage = fixed.get_device_usage_stats()
out["device_usage_only"] = {"columns": [str(c) for c in usage.columns], "rows": usage.values.tolist()}
train = steps_df[steps_df["framework_metric"] == "Step:ModeKeys.TRAIN"]
out["by_begin_end"] = list(pf.get_framework_metrics_by_begin_and_end_timesteps(train["start_time"], train["end_time"]))
print("REFERENCE " + json.dumps(out, default=str))
