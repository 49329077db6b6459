"""The charts and frames shown in a real Jupyter kernel (nbclient + ipykernel): a notebook of the
profiling notebooks' cells, written by us, run against a job sdlocal ran; its outputs are what a
person sees: the frame's HTML table with smdebug's columns, and bokeh's display (BokehJS loaded
inline, no CDN)."""
from __future__ import annotations

import pytest

from tests.evaluator.analysis.conftest import ProfiledJob

pytestmark = pytest.mark.slow

CELLS = [
    "from smdebug.profiler.analysis.utils.profiler_data_to_pandas import PandasFrame\n"
    "pf = PandasFrame({path!r})\nsystem_metrics_df = pf.get_all_system_metrics()\nsystem_metrics_df.head()",
    "from smdebug.profiler.system_metrics_reader import LocalSystemMetricsReader\n"
    "from smdebug.profiler.analysis.notebook_utils.metrics_histogram import MetricsHistogram\n"
    "system_metrics_reader = LocalSystemMetricsReader({path!r})\n"
    "system_metrics_reader.refresh_event_file_list()\n"
    "metrics_histogram = MetricsHistogram(system_metrics_reader)\n"
    "metrics_histogram.plot(starttime=0, endtime=system_metrics_reader.get_timestamp_of_latest_available_file(),\n"
    "                       select_dimensions=['CPU', 'GPU'], select_events=['total'])",
    "metrics_histogram.update_data(system_metrics_reader.get_timestamp_of_latest_available_file() + 10**9)",
]


def test_charts_and_frames_show_in_a_jupyter_kernel(profiled_job: ProfiledJob) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c.format(path=str(profiled_job.local))) for c in CELLS]
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3").execute()
    table = "".join(o.get("data", {}).get("text/html", "") for o in nb.cells[0].outputs)
    for column in ("timestamp_us", "system_metric", "dimension", "nodeID"):
        assert f"<th>{column}</th>" in table
    chart = nb.cells[1].outputs
    mimes = {m for o in chart for m in o.get("data", {})}
    assert "application/vnd.bokehjs_exec.v0+json" in mimes, mimes  # the chart itself, with its notebook handle
    loads = [o for c in nb.cells[:2] for o in c.outputs if "application/vnd.bokehjs_load.v0+json" in o.get("data", {})]
    assert loads, "BokehJS was not loaded into the notebook"
    js = "".join(str(o["data"].get("application/javascript", "")) for o in loads)
    assert "cdn.bokeh.org" not in js and len(js) > 100_000  # BokehJS inline: the notebook draws offline
    assert not [o for c in nb.cells for o in c.outputs if o.get("output_type") == "error"]
