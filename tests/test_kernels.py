"""Every CUDA kernel file compiles to PTX for sm_90 as hspz/engine/gpu.py compiles it (the
preamble and options of `hspz.engine.cuda_source`), for both named seeds, and exports every
kernel gpu.py launches.  Needs `nvcc`, not a GPU or CuPy."""

from __future__ import annotations

import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import hspz
from hspz.engine import cuda_source
from hspz.stages.seed import SeedShape

ENGINE = Path(hspz.__file__).parent / "engine"
KERNELS = cuda_source.KERNELS
GPU_PY = ENGINE / "gpu.py"
SHAPES = {"12of19": "TTT0T00TT00T0T0TTTT", "14of22": "TTT0T0TT00TT00T0T0TTTT"}
NVCC = shutil.which("nvcc")

needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")


def _launched() -> dict[str, set[str]]:
    """{kernel file: kernel names} of every `_kernel(shape, "file", "name")` call in gpu.py."""
    found: dict[str, set[str]] = {}
    calls = re.findall(
        r'_kernel\(\s*(?:self\.)?(?:ctx\.)?shape\s*,\s*"(\w+)"\s*,\s*"(\w+)"\s*\)',
        GPU_PY.read_text(),
    )
    for module, name in calls:
        found.setdefault(module, set()).add(name)
    for name in re.findall(r'_launch\(\s*"(\w+)"', GPU_PY.read_text()):  # _Batch._launch: extend.cu
        found.setdefault("extend", set()).add(name)
    for name in re.findall(r'\("(filter_\w+)", \d\)', GPU_PY.read_text()):  # gpu.FILTERS
        found.setdefault("extend", set()).add(name)
    return found


@pytest.fixture(scope="module")
def ptx(tmp_path_factory) -> dict[tuple[str, str], str]:
    """{(seed name, kernel file stem): PTX text}, compiled in parallel."""
    out = tmp_path_factory.mktemp("ptx")
    jobs = []
    for seed, pattern in SHAPES.items():
        shape = SeedShape.from_pattern(pattern)
        for cu in sorted(KERNELS.glob("*.cu")):
            src = out / f"{seed}_{cu.name}"
            src.write_text(cuda_source.source(cu.stem, shape.size, shape.care))
            jobs.append((seed, cu.stem, src, src.with_suffix(".ptx")))

    def compile_one(job):
        seed, stem, src, dst = job
        proc = subprocess.run(
            [NVCC, "--ptx", "-arch=sm_90", *cuda_source.OPTIONS, str(src), "-o", str(dst)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        return (seed, stem), proc, dst

    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(compile_one, jobs))
    failures = [f"{key}: {proc.stderr}" for key, proc, _ in results if proc.returncode]
    assert not failures, "\n".join(failures)
    return {key: dst.read_text() for key, _, dst in results}


def test_gpu_py_compiles_the_sources_cuda_source_builds():
    text = GPU_PY.read_text()
    assert (
        "cp.RawModule(code=cuda_source.source(name, size, care), options=cuda_source.OPTIONS)"
        in text
    )
    assert "cuda_source.SCRATCH * n" in text  # the sweep's scratch, as the preamble says


def test_the_preamble_names_the_care_positions_of_each_seed_and_the_scratch_layout():
    shape = SeedShape.from_pattern(SHAPES["12of19"])
    assert cuda_source.preamble(shape.size, shape.care) == (
        "#define SEED_SIZE 19\n#define WEIGHT 12\n#define CARE_LIST 0,1,2,4,7,8,11,13,15,16,17,18\n"
        "#define SCRATCH 11\n"
    )


@needs_nvcc
@pytest.mark.parametrize("seed", sorted(SHAPES))
def test_every_kernel_file_compiles_to_sm_90_ptx(ptx, seed):
    stems = sorted(cu.stem for cu in KERNELS.glob("*.cu"))
    assert stems  # there are kernel files to compile
    for stem in stems:
        text = ptx[(seed, stem)]
        assert ".target sm_90" in text
        assert ".entry" in text


@needs_nvcc
@pytest.mark.parametrize("seed", sorted(SHAPES))
def test_every_kernel_gpu_py_launches_is_an_extern_c_entry_of_its_module(ptx, seed):
    launched = _launched()
    assert sum(len(v) for v in launched.values()) >= 5, launched  # the grep really found calls
    for module, names in launched.items():
        assert (seed, module) in ptx, f"gpu.py launches from missing kernels/{module}.cu"
        entries = set(re.findall(r"\.entry\s+(\w+)\s*\(", ptx[(seed, module)]))
        missing = names - entries
        assert not missing, f'{module}.cu lacks extern "C" kernels {sorted(missing)}'


@needs_nvcc
def test_care_positions_reach_the_seed_kernels_constant_table(ptx):
    # WEIGHT sizes the __constant__ CARE table and CARE_LIST fills it, first care position first
    for seed, pattern in SHAPES.items():
        care = SeedShape.from_pattern(pattern).care
        m = re.search(r"\.const \.align 4 \.b8 CARE\[(\d+)\] = \{([^}]*)\}", ptx[(seed, "seed")])
        assert m and int(m.group(1)) == 4 * len(care), seed
        raw = [int(b) for b in m.group(2).split(",")]
        raw += [0] * (4 * len(care) - len(raw))  # PTX drops trailing zero bytes
        ints = [int.from_bytes(bytes(raw[i : i + 4]), "little") for i in range(0, len(raw), 4)]
        assert tuple(ints) == care, seed


C_TYPES = {"int64": "long long", "uint64": "unsigned long long", "uint32": "unsigned int"}
CARRAY = """template <typename T> struct CArray {  // a raw argument, indexed as CuPy's CArray is
  const T* data;
  __device__ const T& operator[](long long k) const { return data[k]; }
};"""


def _elementwise_source(name: str, ins: str, outs: str, body: str) -> str:
    """A kernel as CuPy's ElementwiseKernel wraps `body`: each input and output a variable of
    its name, raw inputs arrays with [] alone; a type placeholder (a name not in C_TYPES) is a
    typedef of unsigned int."""
    params, pre, post, placeholders = [], [], [], set()

    def c_type(kind: str) -> str:
        if kind not in C_TYPES:
            placeholders.add(kind)
        return C_TYPES.get(kind, kind)

    for spec in ins.split(","):
        *raw, kind, var = spec.split()
        if raw:
            params.append(f"CArray<{c_type(kind)}> {var}")
        else:
            params.append(f"const {c_type(kind)}* _in_{var}")
            pre.append(f"const {c_type(kind)} {var} = _in_{var}[_i];")
    for spec in outs.split(","):
        kind, var = spec.split()
        params.append(f"{c_type(kind)}* _out_{var}")
        pre.append(f"{c_type(kind)} {var};")
        post.append(f"_out_{var}[_i] = {var};")
    lines = [
        *(f"typedef unsigned int {t};" for t in sorted(placeholders)),
        f'extern "C" __global__ void hspz_{name}({", ".join(params)}, long long _n) {{',
        "long long _i = (long long)blockIdx.x * blockDim.x + threadIdx.x;",
        "if (_i >= _n) return;",
        *pre,
        body + ";",
        *post,
        "}",
    ]
    return "\n".join(lines)


@needs_nvcc
def test_every_fused_elementwise_body_compiles(tmp_path):
    """gpu._FUSED (issue 27's FUSED trial): CuPy compiles these at run time, so nvcc checks
    their C here."""
    from hspz.engine import gpu

    src = tmp_path / "fused.cu"
    kernels = [_elementwise_source(n, *spec) for n, spec in gpu._FUSED.items()]
    src.write_text("\n".join([CARRAY, *kernels]))
    proc = subprocess.run(
        [NVCC, "--ptx", "-arch=sm_90", str(src), "-o", str(tmp_path / "fused.ptx")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    entries = set(re.findall(r"\.entry\s+(\w+)\s*\(", (tmp_path / "fused.ptx").read_text()))
    assert entries == {f"hspz_{n}" for n in gpu._FUSED}
