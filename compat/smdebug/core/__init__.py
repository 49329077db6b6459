"""smdebug.core: modes, collections, save and reduction configs."""
