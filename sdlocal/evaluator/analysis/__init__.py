"""The profiler analysis API of smdebug's notebooks, over sdlocal's profiler reader (trial.profiler):
metrics readers and their event objects (readers.py, events.py), pandas frames (frames.py) and
their statistics (stats.py), merged Chrome traces (merge.py), the training job of a notebook
(training_job.py), profiler trials (profiler_trial.py) and bokeh 3 charts (charts/).
`smdebug.profiler.*` (compat/) re-exports them under smdebug's module names.

Why here: analysis reads profiler data as the rules and their reports do (the consumer side);
trial/ stays the format and its storage, importing nothing of ours. pandas and bokeh (the
`analysis` extra) are imported when first needed: a missing one is one line naming the extra.
"""
