"""Frozen files on disk: the seal and line reader they share, the manifest, the plan file, the
results file and unit files, and the reference index."""
