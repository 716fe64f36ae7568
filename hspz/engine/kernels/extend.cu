// Extension kernels, one thread per hit: the optional counting sort into reference order, the
// filter (bounded walks that reject most hits exactly) and the exact capped x-drop walk of
// docs/algorithm.md ("Ungapped x-drop"); hits a capped walk leaves unfinished go on to a longer
// walk or finish.cu.

typedef unsigned char u8;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Appends one element per voting lane with a single atomic per warp; returns the slot.
__device__ __forceinline__ u32 warp_append(bool vote, u32* counter)
{
    unsigned mask = __activemask();
    unsigned ballot = __ballot_sync(mask, vote);
    int lane = threadIdx.x & 31;
    int leader = __ffs(mask) - 1;
    u32 base = 0;
    if (lane == leader && ballot) base = atomicAdd(counter, __popc(ballot));
    base = __shfl_sync(mask, base, leader);
    return base + __popc(ballot & ((1u << lane) - 1));
}

// Appends hit (r, q) and its chunk tag to the candidates when `keep` (one atomic per warp).
__device__ __forceinline__ void append_candidate(bool keep, i64 r, i64 q, u32 tag,
                                                 u64* __restrict__ cand,
                                                 u32* __restrict__ cand_tag,
                                                 u32* __restrict__ n_cand)
{
    u32 slot = warp_append(keep, n_cand);
    if (keep) {
        cand[slot] = ((u64)r << 32) | (u64)q;
        cand_tag[slot] = tag;
    }
}

// The seed owning hit h: the first s in [lo, hi] with cum[s] > h (cum is the inclusive prefix sum
// of the hits per seed, and cum[hi] > h).  bseed[b] is the owner of block b's first hit and
// bseed[b + 1] bounds its last, so a thread searches only its block's few seeds.
__device__ __forceinline__ i64 owner(const i64* __restrict__ cum, const i64* __restrict__ bseed,
                                     i64 h)
{
    i64 lo = bseed[blockIdx.x], hi = bseed[blockIdx.x + 1];
    while (lo < hi) {
        i64 mid = (lo + hi) >> 1;
        if (cum[mid] > h) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

// The semantic chunk of hit h: the last c in [lo, hi] with chunk_start[c] <= h (chunk_start[0]
// = 0; chunk_of searches every chunk).
__device__ __forceinline__ u32 chunk_in(const i64* __restrict__ chunk_start, int lo, int hi, i64 h)
{
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (chunk_start[mid] <= h) lo = mid;
        else hi = mid - 1;
    }
    return (u32)lo;
}

__device__ __forceinline__ u32 chunk_of(const i64* __restrict__ chunk_start, int n_chunks, i64 h)
{
    return chunk_in(chunk_start, 0, n_chunks - 1, h);
}

// Where hit h (seed order) lies: its reference and query positions.  magic, where not 0, divides
// the seed slot by `variants` (nib_filter's LEAN, which proves it exact for the block's slots).
__device__ __forceinline__ void hit_at(i64 h, const u32* __restrict__ pos_table,
                                       const u32* __restrict__ lo, const i64* __restrict__ cum,
                                       const u32* __restrict__ counts,
                                       const i64* __restrict__ bseed, const i64* __restrict__ qpos,
                                       i64 first, int variants, i64* r, i64* q, u32 magic = 0)
{
    i64 s = owner(cum, bseed, h);
    *r = (i64)pos_table[lo[s] + h - (cum[s] - counts[s])];
    *q = qpos ? qpos[s] : first + (magic ? (i64)__umulhi((u32)s, magic) : s / variants);
}

// Reference order, a counting sort of one piece's hits by reference window (2^shift bases):
// hit_refs finds each hit's reference position and counts the windows, scatter_hits places
// (r << 32 | q) and its chunk at its window's next slot.  Threads then walk neighbouring
// reference bases, which the caches share.  Only the visiting order changes, never a result.
extern "C" __global__ void hit_refs(
    const u32* __restrict__ pos_table, const u32* __restrict__ lo, const i64* __restrict__ cum,
    const u32* __restrict__ counts, const i64* __restrict__ bseed, i64 h0, i64 n, int shift,
    u32* __restrict__ r_out, u32* __restrict__ hist)
{
    i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= n) return;
    i64 r, q;
    hit_at(h0 + t, pos_table, lo, cum, counts, bseed, nullptr, 0, 1, &r, &q);
    r_out[t] = (u32)r;
    atomicAdd(hist + (r >> shift), 1u);
}

extern "C" __global__ void scatter_hits(
    const u32* __restrict__ r_in, const i64* __restrict__ cum, const i64* __restrict__ bseed,
    const i64* __restrict__ qpos, i64 first, int variants, const i64* __restrict__ chunk_start,
    int n_chunks, i64 h0, i64 n, int shift, u32* __restrict__ cursor, u64* __restrict__ pairs,
    u32* __restrict__ tags)
{
    i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= n) return;
    i64 s = owner(cum, bseed, h0 + t);
    u32 r = r_in[t];
    u64 q = (u64)(qpos ? qpos[s] : first + s / variants);
    u32 slot = atomicAdd(cursor + (r >> shift), 1u);
    pairs[slot] = ((u64)r << 32) | q;
    tags[slot] = chunk_of(chunk_start, n_chunks, h0 + t);
}

// Bases s[p], s[p + 1], ... eight at a time (byte u of the i-th next() is s[p + 8i + u]), from
// aligned 8-byte words: one load per eight bases, where byte loads cost the load unit a request
// per base for each lane's scattered line.  s is 8-byte aligned with PAD spare bytes after its
// last base, so the word after the last base can be read.
struct Forward {
    const u64* w;
    u64 cur;
    int sh;
    __device__ __forceinline__ Forward(const u8* s, i64 p)
        : w((const u64*)(s + (p & ~7ll))), sh((int)(p & 7) * 8) { cur = __ldg(w); }
    __device__ __forceinline__ u64 next()
    {
        u64 nxt = __ldg(++w);
        u64 out = sh ? (cur >> sh) | (nxt << (64 - sh)) : cur;
        cur = nxt;
        return out;
    }
};

__device__ __forceinline__ u64 byte_swap(u64 x)
{
    return ((u64)__byte_perm((u32)x, 0, 0x0123) << 32) | __byte_perm((u32)(x >> 32), 0, 0x0123);
}

// Bases s[e - 1], s[e - 2], ... eight at a time (byte u of the i-th next() is s[e - 1 - 8i - u]):
// a left walk reads the sequence backwards, from the words its right walk has just brought into
// the caches.  s has PAD spare bytes before its first base too.
struct Backward {
    const u64* w;
    u64 hi;
    int sh;
    __device__ __forceinline__ Backward(const u8* s, i64 e)
        : w((const u64*)(s + (e & ~7ll))), sh((int)(e & 7) * 8) { hi = sh ? __ldg(w) : 0; }
    __device__ __forceinline__ u64 next()
    {
        u64 lo = __ldg(--w);
        u64 out = sh ? (lo >> sh) | (hi << (64 - sh)) : lo;
        hi = lo;
        return byte_swap(out);
    }
};

// One side's capped x-drop walk: scores the bases A and B give, k = 0, 1, ..., and stops at the
// first k where the running maximum exceeds the sum by more than xdrop, or at end.  Returns that
// k; *best is the maximum (0 before any gain), *at its first k (-1 if none).  A right walk reads
// Forward from the anchor, a left walk Backward from the base before it.  mat is this lane's
// column of the bank-replicated matrix.
template <class Bases>
__device__ __forceinline__ i64 walk(Bases A, Bases B, i64 end, const int* mat, int xdrop,
                                    int* best, int* at)
{
    int sc = 0, mr = 0, pr = -1;
    i64 k = 0;
    for (; k < end; k += 8) {
        u64 z = (A.next() << 3) | B.next();  // each byte (ref code << 3 | query code); codes < 8
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            if (k + u >= end) { k = end; goto stop; }
            sc += mat[((int)(z >> (8 * u)) & 63) * 32];
            if (sc > mr) { mr = sc; pr = (int)k + u; }
            else if (mr - sc > xdrop) { k += u; goto stop; }
        }
    }
    k = end;
stop:
    *best = mr;
    *at = pr;
    return k;
}

// An upper bound of one side's walk maximum that tests the x-drop only once per 8 bases (the
// last partial block base by base).  It stops no earlier than the exact walk: the running
// maximum is the same until the exact walk stops, and the exact walk tests every base.  So it
// covers at least the exact walk's bases, *bound >= the exact maximum, and a true return means
// the exact walk stopped within `end` bases too.  A full block takes each base's table index
// with one byte permute (PRMT) where `(z >> 8u) & 63` takes two instructions: filter_pass
// 97.2 against 104.7 ms on simM (BENCHMARKS.md, issue 27).
template <class Bases>
__device__ __forceinline__ bool bound_walk(Bases A, Bases B, int end, const int* mat, int xdrop,
                                           int* bound)
{
    int sc = 0, mr = 0, k = 0;
    for (; k + 8 <= end; k += 8) {
        u64 z = (A.next() << 3) | B.next();
        u32 lo = (u32)z, hi = (u32)(z >> 32);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            sc += mat[__byte_perm(u < 4 ? lo : hi, 0, 0x4440 | (u & 3)) * 32];
            mr = max(mr, sc);
        }
        if (mr - sc > xdrop) { *bound = mr; return true; }
    }
    if (k < end) {
        u64 z = (A.next() << 3) | B.next();
        for (int u = 0; k + u < end; ++u) {
            sc += mat[((int)(z >> (8 * u)) & 63) * 32];
            mr = max(mr, sc);
            if (mr - sc > xdrop) { *bound = mr; return true; }
        }
    }
    *bound = mr;
    return false;
}

// This thread's hit and its semantic chunk, false past the last (n) one: hit t = the thread's
// index is pairs[t] + size with chunk tags[t] (reference order, or hits handed on), else hit
// h0 + t in seed order.
__device__ __forceinline__ bool thread_hit(i64 n, const u32* __restrict__ pos_table,
                                           const u32* __restrict__ lo,
                                           const i64* __restrict__ cum,
                                           const u32* __restrict__ counts,
                                           const i64* __restrict__ bseed,
                                           const i64* __restrict__ qpos,
                                           const u64* __restrict__ pairs,
                                           const u32* __restrict__ tags,
                                           const i64* __restrict__ chunk_start, int n_chunks,
                                           i64 h0, i64 first, int variants, int size, i64* r,
                                           i64* q, u32* tag)
{
    i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= n) return false;
    if (pairs) {
        u64 p = pairs[t];
        *r = (i64)(p >> 32);
        *q = (i64)(p & 0xFFFFFFFFull);
        *tag = tags[t];
    } else {
        hit_at(h0 + t, pos_table, lo, cum, counts, bseed, qpos, first, variants, r, q);
        *tag = chunk_of(chunk_start, n_chunks, h0 + t);
    }
    *r += size;
    *q += size;
    return true;
}

// The parameters filter_pass and first_pass share: sequences and lengths, the scoring, and
// where hit t and its chunk come from (HIT_SOURCE, see thread_hit).
#define WALK_PARAMS                                                                              \
    const u8* __restrict__ ref, const u8* __restrict__ qry, i64 ref_len, i64 qry_len,           \
    const int* __restrict__ mat_g, int xdrop, int thresh, int cap,                              \
    const u32* __restrict__ pos_table, const u32* __restrict__ lo, const i64* __restrict__ cum, \
    const u32* __restrict__ counts, const i64* __restrict__ bseed,                              \
    const i64* __restrict__ qpos, const u64* __restrict__ pairs, const u32* __restrict__ tags,  \
    const i64* __restrict__ chunk_start, int n_chunks, i64 h0, i64 n, i64 first, int variants,  \
    int size
#define HIT_SOURCE pos_table, lo, cum, counts, bseed, qpos, pairs, tags, chunk_start, n_chunks, \
    h0, first, variants, size
// Every WALK_PARAMS name after the scoring, in order (a kernel handing its parameters on).
#define HIT_SOURCE_ALL pos_table, lo, cum, counts, bseed, qpos, pairs, tags, chunk_start, \
    n_chunks, h0, n, first, variants, size

// The 8x8 matrix copied into shared memory once per lane (entry i for lane l at i * 32 + l, so
// the lanes' lookups never share a bank); returns this lane's column.
__device__ __forceinline__ const int* lane_matrix(int* mat_rep, const int* __restrict__ mat_g)
{
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) mat_rep[i] = mat_g[i >> 5];
    __syncthreads();
    return mat_rep + (threadIdx.x & 31);
}

// How filter_pass and first_pass begin: the lane's matrix column (every thread of the block
// reaches lane_matrix's barrier before any leaves), then this thread's hit (r, q) and its chunk
// tag, or return for a thread past the last hit.
#define WALK_HIT                                                                                 \
    __shared__ int mat_rep[64 * 32];                                                             \
    const int* mat = lane_matrix(mat_rep, mat_g);                                                \
    i64 r, q;                                                                                    \
    u32 tag;                                                                                     \
    if (!thread_hit(n, HIT_SOURCE, &r, &q, &tag)) return

// The filter before the first pass, one thread per hit: bound both walks (bound_walk); a hit
// whose walks surely stop within `cap` and whose bounds sum under thresh is rejected exactly
// (the exact walks stop too, and score no more).  Every other hit is appended to cand as
// (r << 32 | q), its chunk to cand_tag, for the exact first pass (size 0).  On real genomes
// about 98% are rejected here, at about half the instructions per base of the exact walk.
extern "C" __global__ void filter_pass(
    WALK_PARAMS,
    u64* __restrict__ cand, u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    WALK_HIT;
    int br, bl = 0;
    i64 lim = min(ref_len - r, qry_len - q);
    int end = (int)min(lim, (i64)cap);
    bool reject = bound_walk(Forward(ref, r), Forward(qry, q), end, mat, xdrop, &br)
                  || end == lim;
    if (reject) {
        lim = min(r, q);
        end = (int)min(lim, (i64)cap);
        reject = (bound_walk(Backward(ref, r), Backward(qry, q), end, mat, xdrop, &bl)
                  || end == lim) && br + bl < thresh;
    }
    append_candidate(!reject, r, q, tag, cand, cand_tag, n_cand);
}

// The exact capped walk, one thread per hit: right then left, at most `cap` bases each.
// Finished hits scoring >= thresh are appended to (rs, qs, len, score, tag), unfinished ones to
// late as (r << 32 | q) with their chunk in late_tag.  Each thread's hit comes from thread_hit.
extern "C" __global__ void first_pass(
    WALK_PARAMS,
    i64* __restrict__ out_rs, i64* __restrict__ out_qs, i64* __restrict__ out_len,
    i64* __restrict__ out_score, u32* __restrict__ out_tag, u32* __restrict__ n_out,
    u64* __restrict__ late, u32* __restrict__ late_tag, u32* __restrict__ n_late)
{
    WALK_HIT;

    // right from (r, q) on, then left from (r - 1, q - 1) down; a side that walks `cap` bases
    // without an x-drop stop (and has sequence left) leaves the hit unfinished (late)
    int mr, pr, ml = 0, pl = -1;
    i64 lim = min(ref_len - r, qry_len - q), end = min(lim, (i64)cap);
    bool done = walk(Forward(ref, r), Forward(qry, q), end, mat, xdrop, &mr, &pr) < end
                || end == lim;
    if (done) {
        lim = min(r, q);
        end = min(lim, (i64)cap);
        done = walk(Backward(ref, r), Backward(qry, q), end, mat, xdrop, &ml, &pl) < end
               || end == lim;
    }
    pl += 1;  // the left walk's k counts from r - 1
    bool keep = done && mr + ml >= thresh;
    u32 slot = warp_append(keep, n_out);
    if (keep) {
        out_rs[slot] = r - pl;
        out_qs[slot] = q - pl;
        out_len[slot] = pr + pl;
        out_score[slot] = mr + ml;
        out_tag[slot] = tag;
    }
    slot = warp_append(!done, n_late);
    if (!done) {
        late[slot] = ((u64)r << 32) | (u64)q;
        late_tag[slot] = tag;
    }
}

// ---------------------------------------------------------------------------------------------
// Experimental filter variants (HSPZ_GPU_FILTER, docs/knobs.md; issue 27).  Each rejects exactly
// the hits filter_pass rejects and appends the same candidates (their order within a launch is
// not part of any result: the exact walk's outputs are sorted downstream).
//   filter_hits<K> (hits2, hits4): several hits per thread.  A block of BLOCK threads takes K
//     consecutive blocks' worth of hits (virtual blocks, each with its bseed range), so the
//     matrix copy and its barrier are paid once per K hits of a thread.
//   filter_lane4 (lane4): both, four hits a thread.
//   filter_lane (lane): each base's table address by one byte permute.  The lane's byte offset
//     (lane * 4) and the base's index (ref << 3 | query) go into one PRMT as the address
//     idx * 256 + lane * 4 of a table whose entry idx for lane l is at idx * 64 + l (bank l,
//     as lane_matrix's), where lane_matrix's column needs a PRMT and a LEA a base.
//   filter_nib (nib) and filter_nib16 (nib16, the default): filter_lane over score codes packed
//     two a byte, nib16 on 16-bit halves (below).
// ---------------------------------------------------------------------------------------------

// The matrix for filter_lane: entry i of lane l at i * 64 + l (slots 32..63 unused).
__device__ __forceinline__ void lane_table(int* tab, const int* __restrict__ mat_g)
{
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) tab[(i >> 5) * 64 + (i & 31)] = mat_g[i >> 5];
    __syncthreads();
}

// mat[idx] of this lane for the idx in byte `u & 3` of w: one PRMT builds the byte address.
__device__ __forceinline__ int lane_score(const int* tab, u32 w, u32 lane4, int u)
{
    u32 off = __byte_perm(w, lane4, 0x5504 | ((u & 3) << 4));
    return *(const int*)((const char*)tab + off);
}

// bound_walk with lane_score: the same bound, the same stop.
template <class Bases>
__device__ __forceinline__ bool bound_walk_lane(Bases A, Bases B, int end, const int* tab,
                                                u32 lane4, int xdrop, int* bound)
{
    int sc = 0, mr = 0, k = 0;
    for (; k + 8 <= end; k += 8) {
        u64 z = (A.next() << 3) | B.next();
        u32 lo = (u32)z, hi = (u32)(z >> 32);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            sc += lane_score(tab, u < 4 ? lo : hi, lane4, u);
            mr = max(mr, sc);
        }
        if (mr - sc > xdrop) { *bound = mr; return true; }
    }
    if (k < end) {
        u64 z = (A.next() << 3) | B.next();
        u32 lo = (u32)z, hi = (u32)(z >> 32);
        for (int u = 0; k + u < end; ++u) {
            sc += lane_score(tab, u < 4 ? lo : hi, lane4, u);
            mr = max(mr, sc);
            if (mr - sc > xdrop) { *bound = mr; return true; }
        }
    }
    *bound = mr;
    return false;
}

// owner() for virtual block vb (filter_hits: a block takes several blocks' hits).
__device__ __forceinline__ i64 owner_vb(const i64* __restrict__ cum, const i64* __restrict__ bseed,
                                        i64 vb, i64 h)
{
    i64 lo = bseed[vb], hi = bseed[vb + 1];
    while (lo < hi) {
        i64 mid = (lo + hi) >> 1;
        if (cum[mid] > h) hi = mid;
        else lo = mid + 1;
    }
    return lo;
}

// The filter's decision for hit (r, q) (already past the seed): true = rejected exactly.
template <bool LANE>
__device__ __forceinline__ bool filter_rejects(const u8* __restrict__ ref, const u8* __restrict__ qry,
                                               i64 ref_len, i64 qry_len, const int* mat, u32 lane4,
                                               int xdrop, int thresh, int cap, i64 r, i64 q)
{
    int br, bl = 0;
    i64 lim = min(ref_len - r, qry_len - q);
    int end = (int)min(lim, (i64)cap);
    bool reject = (LANE ? bound_walk_lane(Forward(ref, r), Forward(qry, q), end, mat, lane4, xdrop, &br)
                        : bound_walk(Forward(ref, r), Forward(qry, q), end, mat, xdrop, &br))
                  || end == lim;
    if (reject) {
        lim = min(r, q);
        end = (int)min(lim, (i64)cap);
        reject = ((LANE ? bound_walk_lane(Backward(ref, r), Backward(qry, q), end, mat, lane4, xdrop, &bl)
                        : bound_walk(Backward(ref, r), Backward(qry, q), end, mat, xdrop, &bl))
                  || end == lim) && br + bl < thresh;
    }
    return reject;
}

// K hits a thread; LANE: filter_lane's table and walk (the tables are static shared arrays of
// the kernel that instantiates this, passed in).
template <int K, bool LANE>
__device__ __forceinline__ void filter_hits(WALK_PARAMS, u64* __restrict__ cand,
                                            u32* __restrict__ cand_tag, u32* __restrict__ n_cand,
                                            int* shared)
{
    const int* mat;
    u32 lane4 = (threadIdx.x & 31) << 2;
    if (LANE) {
        lane_table(shared, mat_g);
        mat = shared;
    } else {
        mat = lane_matrix(shared, mat_g);
    }
    for (int k = 0; k < K; ++k) {
        i64 vb = (i64)blockIdx.x * K + k;
        i64 t = vb * blockDim.x + threadIdx.x;
        if (vb * blockDim.x >= n) return;  // the same for the whole block
        bool keep = false;
        i64 r = 0, q = 0;
        u32 tag = 0;
        if (t < n) {
            if (pairs) {
                u64 p = pairs[t];
                r = (i64)(p >> 32);
                q = (i64)(p & 0xFFFFFFFFull);
                tag = tags[t];
            } else {
                i64 h = h0 + t;
                i64 s = owner_vb(cum, bseed, vb, h);
                r = (i64)pos_table[lo[s] + h - (cum[s] - counts[s])];
                q = qpos ? qpos[s] : first + s / variants;
                tag = chunk_of(chunk_start, n_chunks, h);
            }
            r += size;
            q += size;
            keep = !filter_rejects<LANE>(ref, qry, ref_len, qry_len, mat, lane4, xdrop, thresh,
                                         cap, r, q);
        }
        append_candidate(keep, r, q, tag, cand, cand_tag, n_cand);
    }
}

extern "C" __global__ void __launch_bounds__(256, 6) filter_hits2(WALK_PARAMS, u64* __restrict__ cand,
                                        u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    __shared__ int mat_rep[64 * 32];
    filter_hits<2, false>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap, HIT_SOURCE_ALL,
                          cand, cand_tag, n_cand, mat_rep);
}

extern "C" __global__ void __launch_bounds__(256, 6) filter_hits4(WALK_PARAMS, u64* __restrict__ cand,
                                        u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    __shared__ int mat_rep[64 * 32];
    filter_hits<4, false>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap, HIT_SOURCE_ALL,
                          cand, cand_tag, n_cand, mat_rep);
}

extern "C" __global__ void __launch_bounds__(256, 6) filter_lane4(
    WALK_PARAMS, u64* __restrict__ cand, u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    __shared__ int tab[64 * 64];
    filter_hits<4, true>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap, HIT_SOURCE_ALL,
                         cand, cand_tag, n_cand, tab);
}

// filter_lane's body: the kernels differ only in their launch bounds.
__device__ __forceinline__ void filter_lane_hit(WALK_PARAMS, u64* __restrict__ cand,
                                                u32* __restrict__ cand_tag,
                                                u32* __restrict__ n_cand, int* tab)
{
    lane_table(tab, mat_g);
    u32 lane4 = (threadIdx.x & 31) << 2;
    i64 r, q;
    u32 tag;
    if (!thread_hit(n, HIT_SOURCE, &r, &q, &tag)) return;
    bool reject = filter_rejects<true>(ref, qry, ref_len, qry_len, tab, lane4, xdrop, thresh, cap,
                                       r, q);
    append_candidate(!reject, r, q, tag, cand, cand_tag, n_cand);
}

extern "C" __global__ void filter_lane(WALK_PARAMS, u64* __restrict__ cand,
                                       u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    __shared__ int tab[64 * 64];
    filter_lane_hit(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap, HIT_SOURCE_ALL, cand,
                    cand_tag, n_cand, tab);
}

// lane8: filter_lane held to 32 registers, so 8 blocks of 256 fill an SM (filter_lane's 40 allow
// 6: 75% occupancy); ptxas spills one 8-byte value to do it.
extern "C" __global__ void __launch_bounds__(256, 8) filter_lane8(
    WALK_PARAMS, u64* __restrict__ cand, u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    __shared__ int tab[64 * 64];
    filter_lane_hit(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap, HIT_SOURCE_ALL, cand,
                    cand_tag, n_cand, tab);
}

// ---------------------------------------------------------------------------------------------
// filter_nib (issue 27; filter_nib16 below, the default, is it on 16-bit halves): filter_lane
// reading score codes packed two a byte (pack_nibbles: base p of the padded codes is nibble
// p + NIB_PAD), half the bytes from DRAM and one 4-byte load and one funnel shift per 8 bases
// of a sequence.  Same walk, same decisions.
// simM, first launch (Nsight Compute): 14.04 ms against filter_lane's 16.80, DRAM read 8.2 GB
// against 18.0, 10.2e9 warp instructions against 12.3e9 (BENCHMARKS.md, issue 27).
// ---------------------------------------------------------------------------------------------

#define NIB_PAD 16  // gpu.PAD

// out[j] = codes[2j - NIB_PAD] | codes[2j + 1 - NIB_PAD] << 4 for j < n_out, code 7 (`&`) from
// codes[n] on (codes is a score-code view with NIB_PAD readable bytes before it).
extern "C" __global__ void pack_nibbles(const u8* __restrict__ codes, i64 n, i64 n_out,
                                        u8* __restrict__ out)
{
    i64 j = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (j >= n_out) return;
    i64 i = 2 * j - NIB_PAD;
    u32 a = i < n ? codes[i] : 7, b = i + 1 < n ? codes[i + 1] : 7;
    out[j] = (u8)(a | (b << 4));
}

// Bases p, p + 1, ... eight at a time (nibble u of the i-th next() is base p + 8i + u).  The
// words are indexed from one base pointer (one wide multiply-add an address, where a pointer
// stepped in the loop cost four instructions).
struct NibFwd {
    const u32* w;
    int i;
    u32 cur, sh;
    __device__ __forceinline__ NibFwd(const u8* s, i64 p)
    {
        i64 at = p + NIB_PAD;
        w = (const u32*)s + (at >> 3);
        i = 0;
        sh = (u32)(at & 7) * 4;
        cur = __ldg(w);
    }
    __device__ __forceinline__ u32 next()
    {
        u32 nxt = __ldg(w + (++i));
        u32 v = __funnelshift_r(cur, nxt, sh);
        cur = nxt;
        return v;
    }
};

// Bases e - 1, e - 2, ... eight at a time (nibble 7 - u of the i-th next() is base e - 1 - 8i - u).
struct NibBwd {
    const u32* w;
    int i;
    u32 hi, sh;
    __device__ __forceinline__ NibBwd(const u8* s, i64 e)
    {
        i64 at = e - 1 + NIB_PAD;
        w = (const u32*)s + (at >> 3);
        i = 0;
        sh = (u32)((at & 7) + 1) * 4;
        hi = __ldg(w);
    }
    __device__ __forceinline__ u32 next()
    {
        u32 lo = __ldg(w + (--i));
        u32 v = __funnelshift_rc(lo, hi, sh);
        hi = lo;
        return v;
    }
};

// This lane's table entry idx, where byte u of z holds idx + the table's shared address / 256
// (nib_walk adds it once per 4 bases, not once a base): one PRMT makes the shared address.
__device__ __forceinline__ int nib_score(u32 z, u32 lane4, int u)
{
    int v;
    u32 at = __byte_perm(z, lane4, 0x5504 | ((u & 3) << 4));
    asm volatile("ld.shared.u32 %0, [%1];" : "=r"(v) : "r"(at));
    return v;
}

// filter_nib's walk state: the sum and its running maximum in 32 bits (bound_walk_lane's).
struct NibSums {
    int sc = 0, mr = 0, xdrop;
    __device__ __forceinline__ explicit NibSums(int xd) : xdrop(xd) {}
    __device__ __forceinline__ void add(u32 z, u32 lane4, int u)
    {
        sc += nib_score(z, lane4, u);
        mr = max(mr, sc);
    }
    __device__ __forceinline__ bool stopped() const { return mr - sc > xdrop; }
    __device__ __forceinline__ int bound() const { return mr; }
};

// bound_walk_lane over nibble-packed codes, its sums kept by State (NibSums, NibHalves); REV:
// the bases come in nibble order 7, 6, ..., 0.  row: the table's shared address / 256 in each
// byte.  True when the walk stopped within `end` bases; *bound then bounds its maximum.
template <bool REV, class State, class Bases>
__device__ __forceinline__ bool nib_walk(Bases A, Bases B, int end, u32 row, u32 lane4, State st,
                                         int* bound)
{
    for (int k = 0;; k += 8) {
        u32 a = A.next(), b = B.next();
        // even nibbles' table index (ref << 3 | query) in zl's bytes, odd ones' in zh's
        u32 zl = (((a << 3) & 0x78787878u) | (b & 0x0F0F0F0Fu)) + row;
        u32 zh = (((a >> 1) & 0x78787878u) | ((b >> 4) & 0x0F0F0F0Fu)) + row;
        if (k + 8 > end) {
            for (int u = 0; k + u < end; ++u) {
                int nib = REV ? 7 - u : u;
                st.add((nib & 1) ? zh : zl, lane4, nib >> 1);
                if (st.stopped()) break;
            }
            break;
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            int nib = REV ? 7 - u : u;
            st.add((nib & 1) ? zh : zl, lane4, nib >> 1);
        }
        if (st.stopped()) break;
    }
    *bound = st.bound();
    return st.stopped();
}


// ---------------------------------------------------------------------------------------------
// filter_nib16 (HSPZ_GPU_FILTER=nib16; issue 27): filter_nib with one DPX add-max a base.  A walk
// keeps x = [d : sc] in 16-bit halves (d = running maximum - sum, sc = sum); the table entry of a
// base is [-s : s], and __viaddmax_s16x2(x, entry, [0 : -32768]) gives d' = max(d - s, 0) and
// sc' = sc + s at once, where the 32-bit walk takes an add and half a 3-way max.  Scores below
// FLOOR = -(32000 - xdrop) / 8 are raised to it: an upper bound of each score keeps every
// rejection exact (a stop proven on raised scores is a stop of the exact walk, and its maximum
// bounds the exact one), and no half overflows within a block of 8.  gpu.py takes this kernel
// only when cap * (best score) and xdrop fit 16 bits that way.
// ---------------------------------------------------------------------------------------------

// filter_nib's table layout (entry i of lane l at i * 64 + l), each entry [-s : s], s raised to floor.
__device__ __forceinline__ void lane_table16(u32* tab, const int* __restrict__ mat_g, int floor)
{
    for (int i = threadIdx.x; i < 64 * 32; i += blockDim.x) {
        int s = max(mat_g[i >> 5], floor);
        tab[(i >> 5) * 64 + (i & 31)] = ((u32)(-s) << 16) | ((u32)s & 0xFFFFu);
    }
    __syncthreads();
}

// filter_nib16's walk state: [d : sc] in the 16-bit halves of one register.
struct NibHalves {
    u32 x = 0, stop;
    __device__ __forceinline__ explicit NibHalves(int xdrop) : stop(((u32)xdrop << 16) | 0xFFFFu) {}
    __device__ __forceinline__ void add(u32 z, u32 lane4, int u)
    {
        x = __viaddmax_s16x2(x, (u32)nib_score(z, lane4, u), 0x00008000u);
    }
    __device__ __forceinline__ bool stopped() const { return x > stop; }  // d > xdrop
    __device__ __forceinline__ int bound() const { return (int)(x >> 16) + (int)(short)(x & 0xFFFFu); }
};

// ---------------------------------------------------------------------------------------------
// The nib filters' kernels.
// ---------------------------------------------------------------------------------------------

// A nib walk, on 32-bit sums or (HALVES, filter_nib16) on 16-bit halves.
template <bool REV, bool HALVES, class Bases>
__device__ __forceinline__ bool nib_side(Bases A, Bases B, int end, u32 row, u32 lane4,
                                         int xdrop, int* bound)
{
    if (HALVES) return nib_walk<REV>(A, B, end, row, lane4, NibHalves(xdrop), bound);
    return nib_walk<REV>(A, B, end, row, lane4, NibSums(xdrop), bound);
}

// filter_nib's and filter_nib16's body: the same hit, the same decision, their tables and walks.
// SEED (filter_seed, filter_seed16): the left side is first bounded beyond the `span` bases
// before the anchor (the seed, which every left walk crosses rising), from no drawdown: sb[q]
// bounds any walk's best over those bases whatever the reference holds (the sum of each query
// base's best score, where positive; gpu._seed_bounds), so best <= sb[q] + the bound beyond, and
// the walk from the anchor, whose drawdown there is no smaller, stops no later.  Only a hit that
// bound does not reject is walked again from its anchor.  The CPU's first pass does the same
// (xdrop._reject_pass); about a third of a left walk's bases are the seed's.
// LEAN (filter_seed16_lean, filter_seed_lean; gpu.LEAN_HITS, issue 27): nib_filter's hit in seed
// order found with less work a thread.  A hit's chunk tag is looked up only once the filter
// keeps it (about 2% of hits), between the chunks of its block's first and last hit (mostly
// one: no search); and its seed slot is divided by `variants` (q = first + s / variants) with
// one multiply-high by m = ceil(2^32 / variants), exact while s * e < 2^32 (e = m * variants -
// 2^32: s = k * variants + j gives floor(s * m / 2^32) = k + floor((j + s * e / 2^32) /
// variants)).  Lanes 0-2 of the block find these before the table's barrier.  Seed order
// only: gpu.py launches the plain kernel over reference-order pairs.
struct LeanBlock {
    u32 c0, c1, magic;  // magic 0: divide
};

__device__ __forceinline__ void lean_block(LeanBlock* lb, const i64* __restrict__ chunk_start,
                                           int n_chunks, const i64* __restrict__ bseed, i64 h0,
                                           i64 n, int variants)
{
    int k = threadIdx.x;
    if (k < 2) {
        i64 t = min((i64)blockIdx.x * blockDim.x + (k ? blockDim.x - 1 : 0), n - 1);
        u32 c = chunk_of(chunk_start, n_chunks, h0 + t);
        if (k) lb->c1 = c;
        else lb->c0 = c;
    } else if (k == 2) {
        u32 magic = 0;
        u64 smax = (u64)bseed[blockIdx.x + 1];  // every owner() of the block is at most this
        if (variants > 1 && smax < (1ull << 32)) {
            u64 m = 0xFFFFFFFFull / (u64)variants + 1;
            if (smax * (m * (u64)variants - (1ull << 32)) < (1ull << 32)) magic = (u32)m;
        }
        lb->magic = magic;
    }
}

template <bool HALVES, bool SEED, bool LEAN = false>
__device__ __forceinline__ void nib_filter(WALK_PARAMS, const unsigned short* __restrict__ sb,
                                           int span, u64* __restrict__ cand,
                                           u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    __shared__ __align__(256) u32 tab[64 * 64];
    __shared__ LeanBlock lb;
    if (LEAN) lean_block(&lb, chunk_start, n_chunks, bseed, h0, n, variants);
    if (HALVES) lane_table16(tab, mat_g, -((32000 - xdrop) >> 3));
    else lane_table((int*)tab, mat_g);
    // the table's shared address, a multiple of 256 below 64 KB - 16 KB (48 KB of static
    // shared memory at most), so row + 63 < 256 in every byte
    u32 row = ((u32)__cvta_generic_to_shared(tab) >> 8) * 0x01010101u;
    u32 lane4 = (threadIdx.x & 31) << 2;
    i64 r, q;
    u32 tag = 0;
    i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (LEAN) {  // seed order only (pairs unused)
        if (t >= n) return;
        hit_at(h0 + t, pos_table, lo, cum, counts, bseed, qpos, first, variants, &r, &q,
               lb.magic);
        r += size;
        q += size;
    } else if (!thread_hit(n, HIT_SOURCE, &r, &q, &tag)) {
        return;
    }
    int br, bl = 0;
    i64 lim = min(ref_len - r, qry_len - q);
    int end = (int)min(lim, (i64)cap);
    bool reject = nib_side<false, HALVES>(NibFwd(ref, r), NibFwd(qry, q), end, row, lane4, xdrop,
                                          &br)
                  || end == lim;
    bool decided = false;
    if (SEED && reject && min(r, q) >= span) {
        lim = min(r, q) - span;
        end = (int)min(lim, (i64)cap);
        bool stop = nib_side<true, HALVES>(NibBwd(ref, r - span), NibBwd(qry, q - span), end,
                                           row, lane4, xdrop, &bl)
                    || end == lim;
        decided = stop && br + (int)sb[q] + bl < thresh;
    }
    if (reject && !decided) {
        lim = min(r, q);
        end = (int)min(lim, (i64)cap);
        reject = (nib_side<true, HALVES>(NibBwd(ref, r), NibBwd(qry, q), end, row, lane4, xdrop,
                                         &bl)
                  || end == lim) && br + bl < thresh;
    }
    if (LEAN && !reject)
        tag = lb.c0 == lb.c1 ? lb.c0 : chunk_in(chunk_start, (int)lb.c0, (int)lb.c1, h0 + t);
    append_candidate(!reject, r, q, tag, cand, cand_tag, n_cand);
}

extern "C" __global__ void filter_nib(WALK_PARAMS, u64* __restrict__ cand,
                                      u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    nib_filter<false, false>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap,
                             HIT_SOURCE_ALL, nullptr, 0, cand, cand_tag, n_cand);
}

extern "C" __global__ void filter_nib16(WALK_PARAMS, u64* __restrict__ cand,
                                        u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    nib_filter<true, false>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap,
                            HIT_SOURCE_ALL, nullptr, 0, cand, cand_tag, n_cand);
}

// filter_seed (seed) and filter_seed16 (seed16): filter_nib and filter_nib16 with the left side
// bounded beyond the seed first (nib_filter's SEED); sb: gpu._seed_bounds of the query strand
// for `span` bases.
extern "C" __global__ void filter_seed(WALK_PARAMS, const unsigned short* __restrict__ sb,
                                       int span, u64* __restrict__ cand,
                                       u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    nib_filter<false, true>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap,
                            HIT_SOURCE_ALL, sb, span, cand, cand_tag, n_cand);
}

extern "C" __global__ void filter_seed16(WALK_PARAMS, const unsigned short* __restrict__ sb,
                                         int span, u64* __restrict__ cand,
                                         u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    nib_filter<true, true>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap,
                           HIT_SOURCE_ALL, sb, span, cand, cand_tag, n_cand);
}

// filter_seed16 and filter_seed with nib_filter's LEAN hits (gpu.LEAN_HITS).
extern "C" __global__ void filter_seed16_lean(WALK_PARAMS, const unsigned short* __restrict__ sb,
                                              int span, u64* __restrict__ cand,
                                              u32* __restrict__ cand_tag,
                                              u32* __restrict__ n_cand)
{
    nib_filter<true, true, true>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap,
                                 HIT_SOURCE_ALL, sb, span, cand, cand_tag, n_cand);
}

extern "C" __global__ void filter_seed_lean(WALK_PARAMS, const unsigned short* __restrict__ sb,
                                            int span, u64* __restrict__ cand,
                                            u32* __restrict__ cand_tag, u32* __restrict__ n_cand)
{
    nib_filter<false, true, true>(ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap,
                                  HIT_SOURCE_ALL, sb, span, cand, cand_tag, n_cand);
}
