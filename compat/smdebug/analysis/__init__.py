"""smdebug.analysis: helpers for analysing trials."""
