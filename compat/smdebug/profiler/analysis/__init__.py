"""smdebug.profiler.analysis: pandas frames, statistics, notebook charts and merged timelines of a
job's profiler data (evaluator/analysis/). Needs the `analysis` extra (pandas, bokeh)."""
