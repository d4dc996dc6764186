"""The run directory and the cache on disk: atomic writes, JSON lines, free space, output directories, where things
live."""
