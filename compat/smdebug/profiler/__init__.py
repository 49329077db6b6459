"""smdebug.profiler: helpers of smdebug's profiler that user code imports."""
