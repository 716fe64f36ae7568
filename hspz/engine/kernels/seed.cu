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
__device__ __forceinline__ u64 window_slots(u32 k, bool ok, const u32* __restrict__ index_table,
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
    u64 hits = 0;
#pragma unroll
    for (int t = 0; t < V; ++t) {
        lo[i * V + t] = a[t];
        counts[i * V + t] = b[t] - a[t];
        hits += b[t] - a[t];
    }
    return hits;  // the window's hits, every variant
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

#define STAGE_THREADS 256
#define FULL_MASK 0xffffffffu

// x summed over the block's threads before this one (thread order); `warps` is shared scratch of
// STAGE_THREADS / 32 entries.  Every thread of the block must call it.
__device__ __forceinline__ u64 block_before(u64 x, u64* warps)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    u64 upto = x;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        u64 y = __shfl_up_sync(FULL_MASK, upto, o);
        if (lane >= o) upto += y;
    }
    if (lane == 31) warps[warp] = upto;
    __syncthreads();
    u64 before = upto - x;
    for (int w = 0; w < warp; ++w) before += warps[w];
    return before;
}

// query_seeds with the block's slots staged in shared memory, then stored in order: thread i's
// WEIGHT + 1 slots lie WEIGHT + 1 words apart, so a warp's store of one variant wrote 32 sectors
// for 128 bytes (at 12of19, 13 variants: 7.9x the L2 write sectors, 2.5x the time by Nsight
// Compute).  With block_hits (else null), each block's hits, every slot, go to
// block_hits[blockIdx.x] for slot_prefix.  Launched with STAGE_THREADS threads a block
// (WEIGHT <= 15: 32 KB of shared memory at most).
extern "C" __global__ void __launch_bounds__(STAGE_THREADS)
query_seeds_staged(const u8* __restrict__ codes, i64 first, i64 n,
                   const u32* __restrict__ index_table, int variants, u32* __restrict__ lo,
                   u32* __restrict__ counts, u8* __restrict__ valid, i64* __restrict__ block_hits)
{
    constexpr int V = WEIGHT + 1;
    __shared__ u32 stage_lo[STAGE_THREADS * V];
    __shared__ u32 stage_n[STAGE_THREADS * V];
    __shared__ u64 warps[STAGE_THREADS / 32];
    i64 base = blockIdx.x * (i64)STAGE_THREADS;
    i64 i = base + threadIdx.x;
    u32 k = 0;
    bool ok = i < n && window_kmer(codes, first + i, &k);
    if (i < n) valid[i] = ok;
    u64 hits = 0;
    if (variants == 1) {  // one slot a window: already in order
        if (i < n) hits = window_slots<1>(k, ok, index_table, i, lo, counts);
    } else {
        hits = window_slots<V>(k, ok, index_table, threadIdx.x, stage_lo, stage_n);
        __syncthreads();
        i64 m = min((i64)STAGE_THREADS, n - base) * V;
        for (int j = threadIdx.x; j < m; j += STAGE_THREADS) {
            lo[base * V + j] = stage_lo[j];
            counts[base * V + j] = stage_n[j];
        }
    }
    if (block_hits == nullptr) return;  // uniform over the block
    u64 before = block_before(hits, warps);
    if (threadIdx.x == STAGE_THREADS - 1) block_hits[blockIdx.x] = (i64)(before + hits);
}

template <int V>
__device__ __forceinline__ void prefix_slots(const u32* __restrict__ counts, i64 n,
                                             const i64* __restrict__ hits_upto,
                                             i64* __restrict__ cum, u64* stage, u64* warps)
{
    i64 base = blockIdx.x * (i64)STAGE_THREADS;
    i64 m = min((i64)STAGE_THREADS, n - base) * V;
    for (int j = threadIdx.x; j < STAGE_THREADS * V; j += STAGE_THREADS)
        stage[j] = j < m ? counts[base * V + j] : 0;
    __syncthreads();
    u64* mine = stage + threadIdx.x * V;
    u64 hits = 0;
#pragma unroll
    for (int t = 0; t < V; ++t) hits += mine[t];
    u64 upto = block_before(hits, warps) + (blockIdx.x ? (u64)hits_upto[blockIdx.x - 1] : 0);
#pragma unroll
    for (int t = 0; t < V; ++t) {
        upto += mine[t];
        mine[t] = upto;
    }
    __syncthreads();
    for (int j = threadIdx.x; j < m; j += STAGE_THREADS) cum[base * V + j] = (i64)stage[j];
}

// The inclusive prefix sum of the hits per slot of n windows (the seed stream's cum) from
// query_seeds_staged's counts and hits_upto, the inclusive prefix sum of its block_hits: each
// block scans its own slots and adds the blocks' before it.  This replaces CuPy's cumsum of the
// counts, which first copied them to int64 (20 bytes a slot less traffic).
extern "C" __global__ void __launch_bounds__(STAGE_THREADS)
slot_prefix(const u32* __restrict__ counts, i64 n, int variants,
            const i64* __restrict__ hits_upto, i64* __restrict__ cum)
{
    __shared__ u64 stage[STAGE_THREADS * (WEIGHT + 1)];
    __shared__ u64 warps[STAGE_THREADS / 32];
    if (variants == 1) prefix_slots<1>(counts, n, hits_upto, cum, stage, warps);
    else prefix_slots<WEIGHT + 1>(counts, n, hits_upto, cum, stage, warps);
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
