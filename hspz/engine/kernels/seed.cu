// Seeding kernels: the reference seed table and the query seed stream.
// Compiled with a preamble defining SEED_SIZE, WEIGHT and CARE_LIST (see engine/gpu.py).
// A window is valid only when all SEED_SIZE bytes are ACGT (seed code < 4); care bases are packed
// two bits each, the first care position in the most significant bits.

typedef unsigned char u8;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

__constant__ int CARE[WEIGHT] = {CARE_LIST};

__device__ __forceinline__ bool window_kmer(const u8* __restrict__ codes, i64 j, u32* kmer)
{
    for (int i = 0; i < SEED_SIZE; ++i)
        if (codes[j + i] > 3) return false;
    u32 k = 0;
    for (int c = 0; c < WEIGHT; ++c) k = (k << 2) | codes[j + CARE[c]];
    *kmer = k;
    return true;
}

// One key per indexed reference position: (kmer << 32 | position), or all ones when invalid.
// Sorting the keys groups positions by k-mer, ascending inside a group, as KegAlign's table.
extern "C" __global__ void ref_keys(const u8* __restrict__ codes, i64 start, i64 step, i64 count,
                                    u64* __restrict__ keys)
{
    i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i >= count) return;
    i64 p = start + i * step;
    u32 k;
    keys[i] = window_kmer(codes, p, &k) ? (((u64)k << 32) | (u64)p) : ~0ull;
}

// Slots i * V ... i * V + V - 1 of window i's k-mer k: every variant's index_table loads are
// issued before any is used (V is known here, so the loop unrolls; with V a kernel argument
// each variant's two loads waited for the one before: simM's query_seeds, BENCHMARKS.md).
template <int V>
__device__ __forceinline__ void window_slots(u32 k, bool ok, const u32* __restrict__ index_table,
                                             i64 i, u32* __restrict__ lo,
                                             u32* __restrict__ counts)
{
    u32 a[V], b[V];
#pragma unroll
    for (int t = 0; t < V; ++t) {
        u32 v = t == 0 ? k : k ^ (2u << (2 * (t - 1)));
        a[t] = 0;
        b[t] = 0;
        if (ok) {
            b[t] = __ldg(index_table + v);
            a[t] = v ? __ldg(index_table + v - 1) : 0u;
        }
    }
#pragma unroll
    for (int t = 0; t < V; ++t) {
        lo[i * V + t] = a[t];
        counts[i * V + t] = b[t] - a[t];
    }
}

// The dense seed stream of one chunk: VARIANTS slots per window start j = first + i (slot 0 the
// exact k-mer, slot t + 1 the transition at care base t counted from the last).  Invalid windows
// keep their slots with zero hits, which leaves every cumulative hit count, and so the semantic
// chunk walk, exactly as over the compact stream.  variants is 1 or WEIGHT + 1.
extern "C" __global__ void query_seeds(const u8* __restrict__ codes, i64 first, i64 n,
                                       const u32* __restrict__ index_table, int variants,
                                       u32* __restrict__ lo, u32* __restrict__ counts,
                                       u8* __restrict__ valid)
{
    i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i >= n) return;
    u32 k = 0;
    bool ok = window_kmer(codes, first + i, &k);
    valid[i] = ok;
    if (variants == 1) window_slots<1>(k, ok, index_table, i, lo, counts);
    else window_slots<WEIGHT + 1>(k, ok, index_table, i, lo, counts);
}

// query_seeds with the block's slots staged in shared memory, then stored in order: thread i's
// WEIGHT + 1 slots lie WEIGHT + 1 words apart, so a warp's store of one variant wrote 32 sectors
// for 128 bytes (12of19 with transitions: 7.9x the L2 write sectors and 2.5x the time by Nsight
// Compute, BENCHMARKS.md).  Launched with STAGE_THREADS threads a block (a seed's weight is at
// most 15: 32 KB of shared memory at most), for variants = WEIGHT + 1 only (with one slot a
// window, query_seeds' stores are already in order: gpu.py launches it instead).
#define STAGE_THREADS 256
extern "C" __global__ void __launch_bounds__(STAGE_THREADS)
query_seeds_staged(const u8* __restrict__ codes, i64 first, i64 n,
                   const u32* __restrict__ index_table, int variants, u32* __restrict__ lo,
                   u32* __restrict__ counts, u8* __restrict__ valid)
{
    constexpr int V = WEIGHT + 1;
    __shared__ u32 stage_lo[STAGE_THREADS * V];
    __shared__ u32 stage_n[STAGE_THREADS * V];
    i64 base = blockIdx.x * (i64)STAGE_THREADS;
    i64 i = base + threadIdx.x;
    u32 k = 0;
    bool ok = i < n && window_kmer(codes, first + i, &k);
    if (i < n) valid[i] = ok;
    window_slots<V>(k, ok, index_table, threadIdx.x, stage_lo, stage_n);
    __syncthreads();
    i64 m = min((i64)STAGE_THREADS, n - base) * V;
    for (int j = threadIdx.x; j < m; j += STAGE_THREADS) {
        lo[base * V + j] = stage_lo[j];
        counts[base * V + j] = stage_n[j];
    }
}

// Seed and score codes of packed bytes through the two 256-entry tables.  score has `pad` spare
// bytes of code 7 on each side (the walks read whole 8-byte words); the grid covers max(n, pad).
extern "C" __global__ void codes_of(const u8* __restrict__ buf, i64 n,
                                    const u8* __restrict__ seed_lut,
                                    const u8* __restrict__ score_lut, int pad,
                                    u8* __restrict__ seed, u8* __restrict__ score)
{
    i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i < n) {
        u8 b = buf[i];
        seed[i] = seed_lut[b];
        score[pad + i] = score_lut[b];
    }
    if (i < pad) {
        score[i] = 7;
        score[pad + n + i] = 7;
    }
}

__device__ __forceinline__ i64 keys_below(const u64* __restrict__ keys, i64 n, u64 bound)
{
    i64 lo = 0, hi = n;
    while (lo < hi) {
        i64 mid = (lo + hi) >> 1;
        if (keys[mid] < bound) lo = mid + 1; else hi = mid;
    }
    return lo;
}

// KegAlign's index table from the sorted keys: entry k counts the valid keys whose k-mer is at
// most k.  Invalid windows' keys (all ones) sort after every valid key.
extern "C" __global__ void table_index(const u64* __restrict__ keys, i64 n, i64 n_kmers,
                                       u32* __restrict__ index_table)
{
    i64 k = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (k >= n_kmers) return;
    u64 bound = k + 1 < (1ll << 32) ? (u64)(k + 1) << 32 : ~0ull;
    index_table[k] = (u32)keys_below(keys, n, bound);
}

// The position table: the low 32 bits of the first n (valid) sorted keys.
extern "C" __global__ void table_positions(const u64* __restrict__ keys, i64 n,
                                           u32* __restrict__ pos)
{
    i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (i < n) pos[i] = (u32)keys[i];
}
