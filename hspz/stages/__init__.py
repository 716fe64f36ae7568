"""The algorithm's stages on packed bins: seeding, x-drop extension, the HSP gate/dedup/sort,
seed batches and chunk walks, the segments line and -D."""
