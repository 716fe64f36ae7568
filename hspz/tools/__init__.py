"""Side tools the commands call: LASTZ parity (compare), benchmarks, plots and summaries, and
the gapped stage through LASTZ."""
