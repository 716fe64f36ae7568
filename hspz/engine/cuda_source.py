"""The GPU backend's CUDA C sources (kernels/*.cu) as they are compiled: each file after a
preamble of the seed shape's constants and the scratch layout `gpu.py` allocates.  No CuPy here,
so the kernel compile test (tests/test_kernels.py) compiles exactly what `gpu.py` hands CuPy."""

from __future__ import annotations

from pathlib import Path

KERNELS = Path(__file__).with_name("kernels")
OPTIONS = ("--std=c++17",)
SCRATCH = 11  # int64 scratch arrays per hit of sweep_diagonals: its nine, then two outputs


def preamble(size: int, care: tuple[int, ...]) -> str:
    """The #defines every kernel file is compiled with."""
    return (
        f"#define SEED_SIZE {size}\n#define WEIGHT {len(care)}\n"
        f"#define CARE_LIST {','.join(map(str, care))}\n#define SCRATCH {SCRATCH}\n"
    )


def source(name: str, size: int, care: tuple[int, ...]) -> str:
    """kernels/<name>.cu after its preamble."""
    return preamble(size, care) + (KERNELS / f"{name}.cu").read_text()
