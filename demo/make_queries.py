"""How demo/query2.fa.gz and demo/query3.fa were made (run from the repository root; the
bytes are committed, so this is a record, not a build step): two more queries of the demo
reference for the workflow's three-query sheet (config/queries.tsv).

query2: the demo query's second record, re-mutated (6% substitutions, small indels), reverse
complemented, plus 20 kbp of unrelated sequence: a multi-record gzip FASTA.
query3: a 60 kbp piece of reference chr3 at 10% substitutions, soft-masked where the reference
is, with an N gap: plain FASTA, 60 bases a line.
"""

import gzip

import numpy as np

from hspz.io.fasta import write_fasta
from hspz.io.readers import read_records
from hspz.io.records import Record

BASES = np.frombuffer(b"ACGT", np.uint8)


def mutated(rng, seq: np.ndarray, rate: float) -> np.ndarray:
    seq = seq.copy()
    hit = rng.random(len(seq)) < rate
    upper = (seq[hit] & 0x20) == 0
    seq[hit] = np.where(
        upper, BASES[rng.integers(0, 4, hit.sum())], BASES[rng.integers(0, 4, hit.sum())] | 0x20
    )
    cut = rng.integers(0, len(seq), 30)
    return np.delete(seq, cut)


def revcomp(seq: np.ndarray) -> np.ndarray:
    table = bytes.maketrans(b"ACGTacgtN", b"TGCAtgcaN")
    return np.frombuffer(seq.tobytes()[::-1].translate(table), np.uint8).copy()


def main() -> None:
    rng = np.random.default_rng(20261201)
    ref = {r.name: r.seq for r in read_records("demo/reference.fa.gz")}
    qry = read_records("demo/query.2bit")
    q2 = [
        Record("q2a", revcomp(mutated(rng, qry[1].seq, 0.06))),
        Record("q2b", BASES[rng.integers(0, 4, 20_000)]),
    ]
    write_fasta("/tmp/query2.fa", q2)
    with (
        open("/tmp/query2.fa", "rb") as src,
        open("demo/query2.fa.gz", "wb") as raw,
        gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as dst,
    ):
        dst.write(src.read())
    piece = mutated(rng, ref["chr3"][30_000:90_000], 0.10)
    piece[25_000:25_400] = ord("N")
    write_fasta("demo/query3.fa", [Record("q3", piece)])


if __name__ == "__main__":
    main()
