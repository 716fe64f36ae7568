"""Score files the tests write: LASTZ's HOXD70 as a full matrix (the default scores), and one
of +-1,000,000 whose HSP scores pass 2^31."""

HOXD70 = """\
     A     C     G     T
A   91  -114   -31  -123
C -114   100  -125   -31
G  -31  -125   100  -114
T -123   -31  -114    91
"""

MILLION = """\
     A        C        G        T
A  1000000 -1000000 -1000000 -1000000
C -1000000  1000000 -1000000 -1000000
G -1000000 -1000000  1000000 -1000000
T -1000000 -1000000 -1000000  1000000
"""
