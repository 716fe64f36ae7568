"""The CPU engine's own pieces: semantic chunks from the seeds that have hits."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hspz.engine.cpu import semantic_chunks
from hspz.stages import chunks as plan


@settings(max_examples=300, deadline=None)
@given(counts=st.lists(st.integers(0, 9) | st.just(0), max_size=60), max_hits=st.integers(1, 40))
def test_semantic_chunks_of_the_seeds_with_hits_are_chunk_walks_chunks(counts, max_hits):
    """Per chunk of plan.chunk_walk over the whole stream (zero-hit seeds included), the same
    seeds with hits in the same order, chunks holding none of them included."""
    whole = np.array(counts, np.int64)
    at = np.flatnonzero(whole)
    want = [
        at[(at >= s0) & (at <= s1)].tolist()
        for s0, s1 in plan.chunk_walk(np.cumsum(whole), max_hits)
    ]
    got = [at[a:b].tolist() for a, b in semantic_chunks(len(whole), whole[at], at, max_hits)]
    assert got == want
