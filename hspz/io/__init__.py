"""Sequence files: records, FASTA and 2bit reading and writing, format detection, record
digests, and packing records into bins (the one offsets and minus-strand flip)."""
