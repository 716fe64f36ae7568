"""hspz.io.packing: reading FASTA / gzip / 2bit, packing bins, alphabets, reverse complement."""

from __future__ import annotations

import gzip
import re
import shutil
import struct
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from hspz.core.errors import InputError
from hspz.io.digests import records_digest
from hspz.io.fasta import read_fasta_bytes, write_fasta
from hspz.io.packing import (
    COMPLEMENT,
    pack_bin,
    record_offsets,
    reverse_complement,
    score_codes,
    seed_codes,
    table_from,
)
from hspz.io.readers import detect_format, read_records
from hspz.io.records import MAX_BIN_BP, Record
from hspz.io.twobit import read_2bit_bytes, write_2bit

LASTZ_DATA = Path("/usr/share/doc/lastz/examples/test_data")


def rec(name: str, seq: bytes | str) -> Record:
    raw = seq.encode() if isinstance(seq, str) else seq
    return Record(name, np.frombuffer(raw, dtype=np.uint8).copy())


def as_tuples(records: list[Record]) -> list[tuple[str, bytes]]:
    return [(r.name, r.seq.tobytes()) for r in records]


def parse(text: bytes | str) -> list[tuple[str, bytes]]:
    data = text.encode() if isinstance(text, str) else text
    return as_tuples(read_fasta_bytes(data, "test.fa"))


def masked_records() -> list[Record]:
    """Soft-mask, N runs (also inside masked runs), lengths not a multiple of 4, an empty record,
    and one record with many runs (the vectorised block path)."""
    rng = np.random.default_rng(7)
    many = np.frombuffer(b"ACGT", dtype=np.uint8)[rng.integers(0, 4, 5003)]
    for start in range(0, 5000, 37):
        many[start : start + 11] |= 0x20
    for start in range(5, 5000, 53):
        many[start : start + 4] = ord("N")
    many[many == ord("N") | 0x20] = ord("n")
    return [
        rec("plain", "ACGTACGTTGCA"),
        rec("soft", "acgtACGTacg"),
        rec("nruns", "NNNACGTNNNNTTTGCANN"),
        rec("masked_n", "ACGTnnnnacgtNNNNacgtN"),
        rec("empty", ""),
        rec("one", "g"),
        Record("many_runs", many),
    ]


# ---- FASTA parsing rules -------------------------------------------------------------------


def test_fasta_name_is_the_first_whitespace_delimited_token_after_gt():
    got = parse(">chr1 some description\nACGT\n> pig1\nGG\n>a\tb c\nT\n")
    assert [name for name, _ in got] == ["chr1", "pig1", "a"]


def test_fasta_lines_before_the_first_header_are_ignored():
    assert parse("junk line\nACGT\n\n>r1\nAC\n") == [("r1", b"AC")]


def test_fasta_whitespace_and_carriage_returns_inside_sequence_are_dropped():
    got = parse(">r1\r\nAC GT\r\n\tAA\x0bC\x0cG \r\n\r\n>r2\r\nTT\r")
    assert got == [("r1", b"ACGTAACG"), ("r2", b"TT")]


def test_fasta_case_and_every_other_byte_are_kept():
    odd = b"acgtNnRYkm*-.0123xX\x00\x01\x7f\xff>"
    seq = b"ACGT" * 8 + odd  # mostly nucleotides, so the protein rule lets it through
    assert parse(b">r\n" + seq + b"\n") == [("r", seq)]


def test_fasta_gt_inside_a_sequence_line_is_a_sequence_byte():
    assert parse(">r\nAC>GT\n") == [("r", b"AC>GT")]


def test_fasta_zero_length_records_are_allowed():
    assert parse(">a\n>b\nAC\n>c") == [("a", b""), ("b", b"AC"), ("c", b"")]


def test_fasta_last_line_without_newline_is_read():
    assert parse(">a\nAC\nGT") == [("a", b"ACGT")]


@pytest.mark.parametrize("header", [">", "> ", ">\t\r"])
def test_fasta_empty_header_name_is_an_error_naming_the_file_and_line(header):
    with pytest.raises(InputError, match=r"test\.fa: line 3: .*empty name"):
        parse(f">ok\nAC\n{header}\nGT\n")


def test_fasta_without_any_header_is_an_error():
    with pytest.raises(InputError, match=r"test\.fa: no FASTA records"):
        parse("ACGT\nACGT\n")


def test_fasta_name_that_is_not_utf8_is_an_error():
    with pytest.raises(InputError, match=r"line 1"):
        parse(b">\xff\xfe\nAC\n")


def reference_fasta_parse(data: bytes) -> list[tuple[str, bytes]] | str:
    """The rules of docs/algorithm.md, "Input" (any line end, a byte-order mark, blanks
    before '>', headers only, the protein rule), one line at a time (slow, obvious); the
    refusal's words instead of the records."""
    records: list[tuple[str, bytearray]] = []
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    for line in re.split(rb"\r\n|\r|\n", data):
        if line.lstrip(b" \t").startswith(b">"):
            records.append((line.lstrip(b" \t")[1:].split()[0].decode(), bytearray()))
        elif records:
            records[-1][1].extend(b for b in line if b not in b" \t\x0b\x0c")
    bases = b"".join(seq for _, seq in records)
    if not bases:
        return "no sequence bases"
    if 2 * sum(b in b"ACGTUNXacgtunx" for b in bases) < len(bases):
        return "not nucleotides"
    return [(name, bytes(seq)) for name, seq in records]


# `_random_fasta`'s kinds: (line alphabet, what follows the last header): mostly nucleotides;
# mostly protein letters (refused: not nucleotides); whitespace alone (refused: no bases)
FASTA_KINDS = {
    "nucleotides": (b"ACGTACGTACGTacgtNnRY-*>0 \t\x0b\x0c", b"AC"),
    "protein": (b"EFILPQEFILPQACGTw*-> \t", b"EF"),
    "blank": (b" \t\x0b\x0c", b""),
}


def _random_fasta(rng, kind: str = "nucleotides") -> bytes:
    """Headers (blanks before some, unique names) and lines of bases, whitespace, odd bytes and
    '>', joined by LF, CRLF or CR alone at random, a byte-order mark first now and then."""
    alphabet, tail = FASTA_KINDS[kind]
    lines = []
    for i in range(rng.integers(0, 40)):
        if rng.random() < 0.25:
            blanks = b" \t"[: rng.integers(0, 3)]
            lines.append(blanks + b">" + b"n%d" % i + b" desc\t x\r")
        else:
            size = rng.integers(0, 30)
            lines.append(
                bytes(np.frombuffer(alphabet, np.uint8)[rng.integers(0, len(alphabet), size)])
            )
    lines.append(b">last")
    ends = (b"\n", b"\r\n", b"\r")
    data = b"".join(line + ends[rng.integers(0, 3)] for line in lines) + tail
    return (b"\xef\xbb\xbf" if rng.random() < 0.2 else b"") + data


FASTA_CASES = [("nucleotides", seed) for seed in range(40)] + [
    (kind, seed) for kind in ("protein", "blank") for seed in range(10)
]


@pytest.mark.parametrize("kind, seed", FASTA_CASES)
def test_vectorised_fasta_parse_equals_a_line_by_line_reference(kind, seed):
    data = _random_fasta(np.random.default_rng(seed), kind)
    expected = reference_fasta_parse(data)
    if isinstance(expected, str):
        with pytest.raises(InputError, match=expected):
            parse(data)
    else:
        assert parse(data) == expected


def test_the_random_fasta_cases_reach_records_and_both_refusals():
    """The cases above compare records, and each refusal, more than once."""
    outcomes = Counter(
        "records" if isinstance(got, list) else got
        for got in (
            reference_fasta_parse(_random_fasta(np.random.default_rng(seed), kind))
            for kind, seed in FASTA_CASES
        )
    )
    assert min(outcomes[o] for o in ("records", "no sequence bases", "not nucleotides")) > 1


# ---- files, formats, gzip -------------------------------------------------------------------


def test_empty_file_is_an_error(tmp_path):
    path = tmp_path / "empty.fa"
    path.write_bytes(b"")
    with pytest.raises(InputError, match=r"empty\.fa: empty file"):
        read_records(path)


def test_gzip_of_nothing_is_an_empty_file_error(tmp_path):
    path = tmp_path / "empty.fa.gz"
    path.write_bytes(gzip.compress(b""))
    with pytest.raises(InputError, match=r"empty\.fa\.gz: empty file"):
        read_records(path)


def test_missing_file_is_an_input_error_saying_cannot_read(tmp_path):
    missing = tmp_path / "nope.fa"
    with pytest.raises(InputError, match=r"cannot read .*nope\.fa: "):
        read_records(missing)
    with pytest.raises(InputError, match=r"cannot read "):
        detect_format(missing)


def test_directory_is_an_input_error_saying_cannot_read(tmp_path):
    with pytest.raises(InputError, match=r"cannot read "):
        read_records(tmp_path)


def test_format_is_decided_by_magic_bytes_never_by_extension(tmp_path):
    records = masked_records()
    fasta, gz, little, big = (tmp_path / n for n in ("a.2bit", "b.fa", "c.fa.gz", "d.fa"))
    write_fasta(fasta, records)
    gz.write_bytes(gzip.compress(fasta.read_bytes()))
    write_2bit(little, records, "<")
    write_2bit(big, records, ">")
    assert [detect_format(p) for p in (fasta, gz, little, big)] == ["fasta", "gzip", "2bit", "2bit"]
    for path in (fasta, gz, little, big):
        assert read_records(path) == records


def test_gzip_fasta_reads_the_same_records_as_plain_fasta(tmp_path):
    plain, packed = tmp_path / "x.fa", tmp_path / "x.fa.gz"
    write_fasta(plain, masked_records())
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert read_records(packed) == read_records(plain) == masked_records()


def test_multi_member_gzip_reads_as_its_concatenated_content(tmp_path):
    plain, members = tmp_path / "x.fa", tmp_path / "x.bgz"
    write_fasta(plain, masked_records(), width=7)
    data = plain.read_bytes()
    cut = len(data) // 2 + 3  # mid-line, mid-record
    members.write_bytes(gzip.compress(data[:cut]) + gzip.compress(data[cut:]))
    assert read_records(members) == read_records(plain)


def test_gzip_holding_a_2bit_file_is_read_as_2bit(tmp_path):
    twobit, packed = tmp_path / "x.2bit", tmp_path / "x.2bit.gz"
    write_2bit(twobit, masked_records())
    packed.write_bytes(gzip.compress(twobit.read_bytes()))
    assert read_records(packed) == masked_records()


def test_truncated_gzip_is_an_input_error(tmp_path):
    data = gzip.compress(b">r\n" + b"ACGT" * 5000)
    path = tmp_path / "cut.fa.gz"
    for cut in (3, 10, len(data) // 2, len(data) - 1):
        path.write_bytes(data[:cut])
        with pytest.raises(InputError, match=r"cut\.fa\.gz: (truncated|corrupt) gzip"):
            read_records(path)


def test_corrupt_gzip_is_an_input_error(tmp_path):
    data = bytearray(gzip.compress(b">r\n" + bytes(range(256)) * 50))
    data[len(data) // 2] ^= 0xFF
    path = tmp_path / "bad.fa.gz"
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"bad\.fa\.gz: (truncated|corrupt) gzip"):
        read_records(path)


# ---- 2bit ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("byteorder", ["<", ">"])
def test_2bit_round_trip_equals_the_fasta_records_with_soft_mask_and_n_runs(
    tmp_path, byteorder, version
):
    fasta, twobit = tmp_path / "x.fa", tmp_path / "x.2bit"
    write_fasta(fasta, masked_records())
    write_2bit(twobit, masked_records(), byteorder, version)
    assert read_records(twobit) == read_records(fasta) == masked_records()
    assert records_digest(read_records(twobit)) == records_digest(read_records(fasta))


def test_2bit_big_endian_reads_the_same_records_as_little_endian(tmp_path):
    little, big = tmp_path / "l.2bit", tmp_path / "b.2bit"
    write_2bit(little, masked_records(), "<")
    write_2bit(big, masked_records(), ">")
    assert big.read_bytes()[:4] == b"\x1a\x41\x27\x43"
    assert little.read_bytes()[:4] == b"\x43\x27\x41\x1a"
    assert read_records(big) == read_records(little)


def hand_built_2bit(entries, order: str = ">", version: int = 0) -> bytes:
    """A 2bit file built with plain Python, independent of write_2bit: entries are
    (name, bases over TCAG, n_blocks, mask_blocks), blocks as (start, size)."""
    off_fmt = order + ("Q" if version else "I")
    bodies = []
    for _, bases, n_blocks, m_blocks in entries:
        codes = ["TCAG".index(b) for b in bases] + [0] * (-len(bases) % 4)
        packed = bytes(
            (a << 6) | (b << 4) | (c << 2) | d
            for a, b, c, d in zip(*[iter(codes)] * 4, strict=True)
        )
        body = struct.pack(order + "II", len(bases), len(n_blocks))
        body += b"".join(struct.pack(order + "I", s) for s, _ in n_blocks)
        body += b"".join(struct.pack(order + "I", n) for _, n in n_blocks)
        body += struct.pack(order + "I", len(m_blocks))
        body += b"".join(struct.pack(order + "I", s) for s, _ in m_blocks)
        body += b"".join(struct.pack(order + "I", n) for _, n in m_blocks)
        bodies.append(body + struct.pack(order + "I", 0) + packed)
    offset = 16 + sum(2 + len(e[0]) + struct.calcsize(off_fmt) - 1 for e in entries)
    index = b""
    for (name, *_), body in zip(entries, bodies, strict=True):
        index += bytes([len(name)]) + name.encode() + struct.pack(off_fmt, offset)
        offset += len(body)
    header = struct.pack(order + "IIII", 0x1A412743, version, len(entries), 0)
    return header + index + b"".join(bodies)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("order", ["<", ">"])
def test_2bit_decodes_a_hand_built_file_first_base_in_the_high_bits(order, version):
    entries = [
        ("r1", "TCAGGACT", [(1, 2)], [(0, 3), (6, 2)]),
        ("second", "GGGTA", [], []),
        ("z", "", [], []),
    ]
    got = as_tuples(read_2bit_bytes(hand_built_2bit(entries, order, version), "h.2bit"))
    assert got == [("r1", b"tnnGGAct"), ("second", b"GGGTA"), ("z", b"")]


def test_2bit_unordered_and_overlapping_blocks_are_applied_like_ordered_ones():
    bases = "ACGT" * 100
    blocks = [(i, 3) for i in range(0, 396, 4)]
    shuffled = blocks[::-1] + [(10, 20)]  # > 64 blocks, reversed, one overlapping
    ordered = read_2bit_bytes(hand_built_2bit([("r", bases, blocks, blocks)]), "a")
    expected = ordered[0].seq.copy()
    expected[10:30] |= 0x20
    got = read_2bit_bytes(hand_built_2bit([("r", bases, blocks, shuffled)]), "b")
    assert got[0].seq.tobytes() == expected.tobytes()


def test_write_2bit_refuses_bytes_that_2bit_cannot_hold(tmp_path):
    for bad in ("ACGRT", "ACG-", "acgx"):
        with pytest.raises(InputError, match=r"2bit cannot hold"):
            write_2bit(tmp_path / "x.2bit", [rec("r", bad)])
    assert not list(tmp_path.iterdir())


def small_2bit() -> bytes:
    return hand_built_2bit([("a", "ACGTAC", [(0, 1)], [(2, 2)]), ("b", "GGT", [], [(0, 1)])])


def test_every_truncation_of_a_2bit_file_is_an_input_error():
    data = small_2bit()
    assert len(read_2bit_bytes(data, "ok")) == 2
    for cut in range(len(data)):
        with pytest.raises(InputError, match=r"cut\.2bit: "):
            read_2bit_bytes(data[:cut], "cut.2bit")


def patched(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


@pytest.mark.parametrize(
    ("offset", "fmt", "value", "problem"),
    [
        (4, ">I", 2, "unsupported 2bit version 2"),
        (8, ">I", 10**9, "record count"),
        (8, ">I", 0, "no records"),
        (18, ">I", 10**6, "offset 1000000 is outside the file"),
        (16, ">B", 0, "empty or truncated name"),
        (16, ">B", 200, r"empty or truncated name|outside the file|truncated"),
    ],
)
def test_corrupt_2bit_header_or_index_is_an_input_error(offset, fmt, value, problem):
    with pytest.raises(InputError, match=rf"bad\.2bit: .*({problem})"):
        read_2bit_bytes(patched(small_2bit(), offset, fmt, value), "bad.2bit")


def test_corrupt_2bit_record_fields_are_input_errors():
    data = small_2bit()
    (first,) = struct.unpack_from(">I", data, 18)
    cases = {  # record 'a' (6 bases): dnaSize, nBlockCount, nBlockSizes[0]
        first: (10**6, "1000000 bases run past the end of the file"),
        first + 4: (10**8, "N block count 100000000 runs past the end of the file"),
        first + 12: (7, "a N block runs past the record's 6 bases"),
    }
    for at, (value, problem) in cases.items():
        with pytest.raises(InputError, match=rf"bad\.2bit: 2bit record 'a': {problem}"):
            read_2bit_bytes(patched(data, at, ">I", value), "bad.2bit")


def test_bad_2bit_signature_is_an_input_error():
    with pytest.raises(InputError, match=r"not a 2bit file"):
        read_2bit_bytes(b"\x00" * 32, "x.2bit")


def test_randomly_damaged_2bit_never_raises_anything_but_input_error():
    data = small_2bit()
    rng = np.random.default_rng(3)
    for _ in range(500):
        damaged = bytearray(data)
        for pos in rng.integers(4, len(data), rng.integers(1, 4)):
            damaged[pos] = rng.integers(0, 256)
        try:
            read_2bit_bytes(bytes(damaged), "fuzz.2bit")
        except InputError:
            pass


# ---- the real LASTZ example files ----------------------------------------------------------


def lastz_file(name: str, tmp_path: Path) -> Path:
    source = LASTZ_DATA / name
    if not source.exists():
        pytest.skip(f"{source} not installed (Debian package lastz-examples)")
    if not name.endswith(".gz"):
        return source
    target = tmp_path / name[: -len(".gz")]
    with gzip.open(source, "rb") as src, open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def test_lastz_pseudopig_2bit_and_fasta_decode_to_identical_records_soft_mask_included(tmp_path):
    twobit = lastz_file("pseudopig.2bit.gz", tmp_path)
    fasta = lastz_file("pseudopig.fa.gz", tmp_path)
    assert detect_format(twobit) == "2bit" and detect_format(fasta) == "fasta"
    from_2bit, from_fasta = read_records(twobit), read_records(fasta)
    assert [(r.name, len(r)) for r in from_2bit] == [(f"pig{i}", 22929) for i in (1, 2, 3)]
    assert any((r.seq >= ord("a")).any() for r in from_2bit)  # the soft-mask is really there
    assert from_2bit == from_fasta  # exactly, case included


def test_lastz_shorties_2bit_and_fasta_gz_hold_the_same_records(tmp_path):
    twobit = lastz_file("shorties.2bit", tmp_path)
    fasta_gz = LASTZ_DATA / "shorties.fa.gz"
    assert read_records(twobit) == read_records(fasta_gz)


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize("byteorder", ["<", ">"])
def test_lastz_aglobin_2bit_with_n_and_masked_n_round_trips_through_our_writer(
    tmp_path, byteorder, version
):
    original = read_records(lastz_file("aglobin.2bit.gz", tmp_path))
    joined = np.concatenate([r.seq for r in original])
    assert (joined == ord("N")).any() and (joined == ord("n")).any()
    write_2bit(tmp_path / "again.2bit", original, byteorder, version)
    write_fasta(tmp_path / "again.fa", original)
    assert read_records(tmp_path / "again.2bit") == original
    assert read_records(tmp_path / "again.fa") == original


# ---- writing and digests ---------------------------------------------------------------------


@pytest.mark.parametrize("width", [0, 1, 3, 4, 60])
def test_write_fasta_round_trips_at_any_line_width(tmp_path, width):
    path = tmp_path / "w.fa"
    write_fasta(path, masked_records(), width)
    assert read_records(path) == masked_records()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.fa"]  # no temporary left


def test_write_fasta_wraps_lines_at_the_width(tmp_path):
    path = tmp_path / "w.fa"
    write_fasta(path, [rec("r", "ACGTACG"), rec("e", "")], width=3)
    assert path.read_bytes() == b">r\nACG\nTAC\nG\n>e\n"


def test_write_fasta_refuses_names_fasta_cannot_hold(tmp_path):
    for name in ("", "two words", "tab\tname"):
        with pytest.raises(InputError, match=r"FASTA cannot hold"):
            write_fasta(tmp_path / "x.fa", [rec(name, "AC")])


def test_records_digest_is_the_same_for_fasta_gzip_and_2bit_of_the_same_records(tmp_path):
    write_fasta(tmp_path / "a.fa", masked_records())
    (tmp_path / "a.fa.gz").write_bytes(gzip.compress((tmp_path / "a.fa").read_bytes()))
    write_2bit(tmp_path / "a.2bit", masked_records(), ">", 1)
    digests = {records_digest(read_records(tmp_path / n)) for n in ("a.fa", "a.fa.gz", "a.2bit")}
    assert digests == {records_digest(masked_records())}


def test_records_digest_catches_same_size_edits_renames_and_moved_boundaries():
    base = records_digest([rec("a", "AC"), rec("b", "GT")])
    assert len(base) == 64
    assert records_digest([rec("a", "AC"), rec("b", "GA")]) != base
    assert records_digest([rec("a", "AC"), rec("b", "gt")]) != base
    assert records_digest([rec("a", "AC"), rec("c", "GT")]) != base
    assert records_digest([rec("a", "ACG"), rec("b", "T")]) != base
    assert records_digest([rec("b", "GT"), rec("a", "AC")]) != base


# ---- packing a bin ---------------------------------------------------------------------------


def test_pack_bin_concatenates_records_in_order_each_followed_by_separator():
    packed = pack_bin([rec("a", "ACG"), rec("b", ""), rec("c", "tN")], prefix="ref.")
    assert packed.buf.tobytes() == b"ACG&&tN&"
    assert packed.block_len == 7
    assert packed.names == ("ref.a", "ref.b", "ref.c")
    assert packed.starts.tolist() == [0, 4, 5]
    assert packed.lengths.tolist() == [3, 0, 2]
    assert packed.starts.dtype == packed.lengths.dtype == np.int64


def test_record_at_maps_every_offset_to_the_record_that_holds_it():
    packed = pack_bin([rec("a", "ACG"), rec("b", ""), rec("c", "tN")])
    # offsets 0..7 are A C G & | & | t N &: a separator belongs to the record before it
    assert packed.record_at(np.arange(8)).tolist() == [0, 0, 0, 0, 1, 2, 2, 2]
    assert packed.record_at(np.array([-1])).tolist() == [-1]


def test_pack_bin_refuses_a_record_of_4294967295_bp_or_more():
    huge = Record("huge", np.broadcast_to(np.uint8(65), (MAX_BIN_BP,)))
    with pytest.raises(InputError, match=r"'huge'.*below 4294967295"):
        pack_bin([huge])


def test_pack_bin_refuses_a_bin_of_4294967295_bp_or_more():
    half = Record("half", np.broadcast_to(np.uint8(65), (MAX_BIN_BP // 2 + 1,)))
    with pytest.raises(InputError, match=r"bins must stay below 4294967295"):
        pack_bin([half, half])


# ---- reverse complement ----------------------------------------------------------------------


def expected_complement(byte: int) -> int:
    pairs = {"A": "T", "C": "G", "R": "Y", "K": "M", "B": "V", "D": "H", "S": "S", "W": "W"}
    table = {**pairs, **{v: k for k, v in pairs.items()}, "N": "N", "X": "N", "U": "A"}
    table.update({k.lower(): v.lower() for k, v in table.items()})
    table["&"] = "&"
    return ord(table.get(chr(byte), "N"))


def test_complement_table_pairs_iupac_codes_keeps_case_and_maps_x_u_and_others():
    assert COMPLEMENT.tolist() == [expected_complement(b) for b in range(256)]
    assert COMPLEMENT[np.frombuffer(b"ATCGRYKMBVDHSWN&XxUu*-", np.uint8)].tobytes() == (
        b"TAGCYRMKVBHDSWN&NnAaNN"
    )
    assert COMPLEMENT[np.frombuffer(b"atcgrykmbvdhswn", np.uint8)].tobytes() == b"tagcyrmkvbhdswn"


def test_reverse_complement_reverses_the_record_table_with_mapped_starts():
    records = [rec("a", "AACG"), rec("b", ""), rec("c", "tgX"), rec("d", "U")]
    plus = pack_bin(records, prefix="q.")
    minus = reverse_complement(plus)
    assert minus.buf.tobytes() == b"A&Nca&&CGTT&"  # plus: AACG&&tgX&U&
    assert minus.block_len == plus.block_len == 11
    assert minus.names == ("q.d", "q.c", "q.b", "q.a")
    assert minus.lengths.tolist() == [1, 3, 0, 4]
    assert minus.starts.tolist() == (11 - plus.starts - plus.lengths)[::-1].tolist()
    for i, r in enumerate(records[::-1]):
        s, n = int(minus.starts[i]), int(minus.lengths[i])
        assert minus.buf[s : s + n].tobytes() == COMPLEMENT[r.seq[::-1]].tobytes()


@pytest.mark.parametrize("seq", ["ACGTN", "acgtn", "ACGTRYKMBVDHSWNacgtrykmbvdhswn", "A", ""])
def test_reverse_complement_twice_gives_the_original_bin(seq):
    plus = pack_bin([rec("a", seq), rec("b", seq[::-1]), rec("c", "GATTACA")])
    twice = reverse_complement(reverse_complement(plus))
    assert twice.buf.tobytes() == plus.buf.tobytes()
    assert twice.names == plus.names
    assert twice.starts.tolist() == plus.starts.tolist()
    assert twice.lengths.tolist() == plus.lengths.tolist()


# ---- the two alphabets -----------------------------------------------------------------------


def test_seed_codes_count_only_uppercase_acgt_for_all_256_bytes():
    codes = seed_codes(np.arange(256, dtype=np.uint8))
    expected = [b"ACGT".index(b) if b in b"ACGT" else 4 for b in range(256)]
    assert codes.dtype == np.uint8 and codes.tolist() == expected


def test_score_codes_map_all_256_bytes_to_the_eight_symbols():
    codes = score_codes(np.arange(256, dtype=np.uint8))
    special = {**{b: i for i, b in enumerate(b"ACGT")}, **dict.fromkeys(b"acgt", 4)}
    special.update({ord("N"): 5, ord("n"): 5, ord("&"): 7})
    assert codes.dtype == np.uint8
    assert codes.tolist() == [special.get(b, 6) for b in range(256)]


def test_code_lookups_equal_numpy_gathers_for_every_byte():
    from hspz.io.packing import (
        COMPLEMENT,
        SCORE_TABLE,
        SEED_TABLE,
        both_codes,
        score_codes,
        seed_codes,
    )

    rng = np.random.default_rng(4)
    buf = np.concatenate((np.arange(256, dtype=np.uint8), rng.integers(0, 256, 10_000, np.uint8)))
    seed, score = both_codes(buf)
    assert np.array_equal(seed, SEED_TABLE[buf]) and np.array_equal(score, SCORE_TABLE[buf])
    assert np.array_equal(seed_codes(buf[::3]), SEED_TABLE[buf[::3]])  # strided input
    codes = np.frombuffer(b"ACgtN&x", np.uint8)
    assert np.array_equal(score_codes(list(b"ACgtN&x")), SCORE_TABLE[codes])
    packed = pack_bin([Record("a", buf[:5000]), Record("b", buf[5000:])])
    minus = reverse_complement(packed)
    n = packed.block_len
    assert np.array_equal(minus.buf[:n], COMPLEMENT[packed.buf[:n]][::-1])


@pytest.mark.parametrize("items", [1, 7, 4096, 1 << 20])
def test_lookup_in_pieces_equals_one_gather(monkeypatch, items):
    """`packing.numpy_lookup` hands numpy its codes in pieces of LOOKUP_ITEMS: into any views (a
    reversed source, a strided one, a wider output type) the bytes of one whole gather."""
    from hspz.io import packing
    from hspz.io.twobit import _TWOBIT_LUT

    monkeypatch.setattr(packing, "LOOKUP_ITEMS", items)
    rng = np.random.default_rng(items)
    codes = rng.integers(0, 256, 10_007, np.uint8)
    for table in (packing.SCORE_TABLE, packing.COMPLEMENT, _TWOBIT_LUT):
        for src in (codes, codes[::-1], codes[::3]):
            out = np.zeros(len(src), table.dtype)
            packing.numpy_lookup(table, src, out)
            assert out.tobytes() == table[src].tobytes()
        out = np.zeros(2 * len(codes), table.dtype)
        packing.numpy_lookup(table, codes[::-1], out[::-2])  # a reversed, strided output
        assert out[::-2].tobytes() == table[codes[::-1]].tobytes() and not out[-2::-2].any()


@pytest.mark.parametrize("lengths", [[7], [1, 1], [5, 0, 12, 3], [1000, 1, 250, 4096, 2]])
def test_packed_bins_and_base_free_tables_take_one_set_of_offsets(lengths):
    """`record_offsets` is the one definition: a packed bin's table, its reverse complement's and
    the emitter's base-free table (`table_from`) are the same starts, lengths and order."""
    rng = np.random.default_rng(len(lengths))
    records = [
        Record(f"r{i}", rng.choice(np.frombuffer(b"ACGT", np.uint8), n))
        for i, n in enumerate(lengths)
    ]
    plus = pack_bin(records, "p.")
    minus = reverse_complement(plus)
    names, sizes = [r.name for r in records], [len(r) for r in records]
    for packed, strand in ((plus, "plus"), (minus, "minus")):
        table = table_from(names, sizes, "p.", strand)
        starts, lens, block_len = record_offsets(sizes, strand)
        assert table.block_len == packed.block_len == block_len and table.names == packed.names
        assert table.starts.tolist() == packed.starts.tolist() == starts.tolist()
        assert table.lengths.tolist() == packed.lengths.tolist() == lens.tolist()
    pairs = zip(plus.starts.tolist(), plus.lengths.tolist(), strict=True)
    assert minus.starts.tolist() == [plus.block_len - s - n for s, n in pairs][::-1]


def test_spans_follow_span_bytes_as_a_test_sets_it(monkeypatch):
    """on_threads reads SPAN_BYTES when called: the threaded tests below, which lower it, do
    cut their small bins into one span a thread (a default bound at import did not)."""
    from hspz.io import packing

    monkeypatch.setattr(packing, "SPAN_BYTES", 1000)
    spans: list[tuple[int, int]] = []
    packing.on_threads(lambda lo, hi: spans.append((lo, hi)), 10_000, 4)
    assert sorted(spans) == [(0, 2500), (2500, 5000), (5000, 7500), (7500, 10_000)]
    spans.clear()
    packing.on_threads(lambda lo, hi: spans.append((lo, hi)), 10_000, 4, 5000)
    assert sorted(spans) == [(0, 5000), (5000, 10_000)]


@pytest.mark.parametrize("numba", [False, True])
def test_packing_and_codes_on_many_threads_give_the_one_thread_bytes(numba, monkeypatch):
    """pack_bin, both alphabets and the reverse complement split their work into spans on
    `threads` threads: every byte is the one-thread result, across record boundaries and
    with spans that do not divide the bin, with numpy's path and with numba's."""
    from hspz.core import jit
    from hspz.io import packing

    monkeypatch.setattr(packing, "SPAN_BYTES", 1000)
    monkeypatch.setattr(packing, "LOOKUP_ITEMS", 333)  # numpy's pieces cut every span
    if numba:
        jit.load()
    else:
        monkeypatch.setattr(jit, "loaded", lambda: False)
    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b"ACGTacgtNnRYxX-", np.uint8)
    records = [
        rec(f"r{i}", rng.choice(alphabet, n).tobytes())
        for i, n in enumerate([3001, 1, 0, 4999, 77, 2500])
    ]
    one = pack_bin(records, "p.", 1)
    for threads in (2, 3, 7, 64):
        many = pack_bin(records, "p.", threads)
        assert many.buf.tobytes() == one.buf.tobytes() and many.names == one.names
        assert seed_codes(one.buf, threads).tobytes() == packing.SEED_TABLE[one.buf].tobytes()
        assert score_codes(one.buf, threads).tobytes() == packing.SCORE_TABLE[one.buf].tobytes()
        s, c = packing.both_codes(one.buf, threads)
        assert s.tobytes() == packing.SEED_TABLE[one.buf].tobytes()
        assert c.tobytes() == packing.SCORE_TABLE[one.buf].tobytes()
        flipped = reverse_complement(one, threads).buf
        n = one.block_len
        assert flipped[:n].tobytes() == packing.COMPLEMENT[one.buf[:n][::-1]].tobytes()
        assert flipped.tobytes() == reverse_complement(one, 1).buf.tobytes()


def test_a_large_2bit_record_decodes_on_threads_to_the_same_bases(monkeypatch, tmp_path):
    """One 2bit record past the threaded size unpacks in spans on every core: the same bases
    as the one-span decode, N and mask blocks included, in either byte order."""
    from hspz.io import packing, twobit

    rng = np.random.default_rng(3)
    seq = rng.choice(np.frombuffer(b"ACGTacgtNn", np.uint8), 40_003)
    for order in ("<", ">"):
        path = tmp_path / f"big{order == '<'}.2bit"
        write_2bit(path, [rec("big", seq.tobytes())], order)
        data = path.read_bytes()
        monkeypatch.setattr(twobit, "_THREADED_BYTES", 1 << 40)
        single = read_2bit_bytes(data, "a")[0].seq.tobytes()
        monkeypatch.setattr(twobit, "_THREADED_BYTES", 100)
        monkeypatch.setattr(twobit, "SPAN_BYTES", 400)  # 100 packed bytes a span
        monkeypatch.setattr(packing, "LOOKUP_ITEMS", 33)  # numpy's pieces cut every span
        monkeypatch.setattr(twobit.os, "cpu_count", lambda: 16)
        assert read_2bit_bytes(data, "b")[0].seq.tobytes() == single == seq.tobytes()
