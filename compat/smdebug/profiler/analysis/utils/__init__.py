"""smdebug.profiler.analysis.utils: PandasFrame, PandasFrameAnalysis, MergedTimeline."""
