"""Infrastructure every layer uses: errors and exit codes, options and their limits, environment
knobs, record names, the scoring matrix, numba loading (jit, lean), fault points, progress, and
durable writes (the one home of write-and-fsync)."""
