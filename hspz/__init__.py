"""hspZ: exact high-scoring segment pairs (HSPs) for whole-genome DNA alignment.

The data flows through one module per stage:

    sequence -> plan -> schedule -> engine (cpu | gpu) -> emit

`sequence` reads FASTA / FASTA.gz / 2bit and packs records into bins; `plan` freezes bins, work
units, intervals and chunks; `schedule` assigns units to workers; `engine` runs the Seed+Filter
contract on one unit (`seed` builds tables and query seeds, `xdrop` extends hits, `hsp` applies
entropy, dedup and order); `emit` replays unit results by ordinal into LASTZ segments files.
"""

__version__ = "0.1.0"
