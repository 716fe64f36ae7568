// Extension kernels, one thread per hit: the optional counting sort into reference order, the
// filter (bounded walks that reject most hits exactly) and the exact capped x-drop walk of
// behaviour.md; hits a capped walk leaves unfinished go on to a longer walk or finish.cu.

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

// The semantic chunk of hit h: the last c with chunk_start[c] <= h (chunk_start[0] = 0).
__device__ __forceinline__ u32 chunk_of(const i64* __restrict__ chunk_start, int n_chunks, i64 h)
{
    int lo = 0, hi = n_chunks - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (chunk_start[mid] <= h) lo = mid;
        else hi = mid - 1;
    }
    return (u32)lo;
}

// Where hit h (seed order) lies: its reference and query positions.
__device__ __forceinline__ void hit_at(i64 h, const u32* __restrict__ pos_table,
                                       const u32* __restrict__ lo, const i64* __restrict__ cum,
                                       const u32* __restrict__ counts,
                                       const i64* __restrict__ bseed, const i64* __restrict__ qpos,
                                       i64 first, int variants, i64* r, i64* q)
{
    i64 s = owner(cum, bseed, h);
    *r = (i64)pos_table[lo[s] + h - (cum[s] - counts[s])];
    *q = qpos ? qpos[s] : first + s / variants;
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
// the exact walk stopped within `end` bases too.
template <class Bases>
__device__ __forceinline__ bool bound_walk(Bases A, Bases B, int end, const int* mat, int xdrop,
                                           int* bound)
{
    int sc = 0, mr = 0, k = 0;
    for (; k + 8 <= end; k += 8) {
        u64 z = (A.next() << 3) | B.next();
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            sc += mat[((int)(z >> (8 * u)) & 63) * 32];
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
    u32 slot = warp_append(!reject, n_cand);
    if (!reject) {
        cand[slot] = ((u64)r << 32) | (u64)q;
        cand_tag[slot] = tag;
    }
}

// filter_pass with lanes that refill: each warp takes a contiguous range of the piece's hits
// (seed order, per_warp hits from h0 + warp * per_warp; wseed[warp] the owner of its first) and
// lane l its hits l, l + 32, ...; a lane that finishes a hit (or a side) starts its next one
// (or its other side) at once, so a warp steps as long as its lanes' mean walk, not its longest
// one.  Every lane steps 8 bases at a time, the x-drop tested after each 8 as bound_walk does;
// a last block short of `end` scores its missing bases 0 (the zero entry, index 64, of the
// lane's matrix), which leaves the walk's sums, maximum and drop as they were.  That block's
// drop is tested at its end only, so a stop inside it can go unseen: the side is then judged by
// end == lim alone, which only keeps a hit filter_pass would reject, never the reverse.  The
// candidates are filter_pass's (or more, near sequence ends), in another order.
struct Dual {
    const u64* w;
    u64 old;
    int sh;
    bool fwd;
    __device__ __forceinline__ void forward(const u8* s, i64 p)
    {
        w = (const u64*)(s + (p & ~7ll));
        sh = (int)(p & 7) * 8;
        old = __ldg(w);
        fwd = true;
    }
    __device__ __forceinline__ void backward(const u8* s, i64 e)
    {
        w = (const u64*)(s + (e & ~7ll));
        sh = (int)(e & 7) * 8;
        old = sh ? __ldg(w) : 0;
        fwd = false;
    }
    __device__ __forceinline__ u64 next()
    {
        w += fwd ? 1 : -1;
        u64 nw = __ldg(w);
        u64 lo = fwd ? old : nw, hi = fwd ? nw : old;
        u64 out = sh ? (lo >> sh) | (hi << (64 - sh)) : lo;
        old = nw;
        return fwd ? out : byte_swap(out);
    }
};

// The first s >= s0 with cum[s] > h (cum[s0 - 1] <= h if s0 > 0, and cum[last] > h): a
// galloping search from the lane's last seed, as its hits only grow.
__device__ __forceinline__ i64 gallop(const i64* __restrict__ cum, i64 s0, i64 last, i64 h)
{
    if (cum[s0] > h) return s0;
    i64 lo = s0, step = 1, hi;  // cum[lo] <= h
    for (;;) {
        hi = min(lo + step, last);
        if (cum[hi] > h) break;
        lo = hi;
        step <<= 1;
    }
    while (hi - lo > 1) {  // cum[lo] <= h < cum[hi]
        i64 mid = (lo + hi) >> 1;
        if (cum[mid] > h) hi = mid;
        else lo = mid;
    }
    return hi;
}

// DYNAMIC: a lane takes BLOCK-hit pieces of consecutive hits, the next from a counter
// (*next_piece, zero at launch), starting from bseed[piece] (`_block_seeds`), instead of its
// fixed share of its warp's range; then wseed and per_warp are not read.
#define REFILL_PARAMS                                                                            \
    WALK_PARAMS, i64 per_warp, i64 n_slots, const i64* __restrict__ wseed,                       \
    u32* __restrict__ next_piece, u64* __restrict__ cand, u32* __restrict__ cand_tag,           \
    u32* __restrict__ n_cand

template <bool DYNAMIC>
__device__ __forceinline__ void refill_body(REFILL_PARAMS)
{
    __shared__ int mat_rep[65 * 32];
    for (int i = threadIdx.x; i < 65 * 32; i += blockDim.x)
        mat_rep[i] = i < 64 * 32 ? mat_g[i >> 5] : 0;
    __syncthreads();
    const int* mat = mat_rep + (threadIdx.x & 31);
    i64 t, t_end, s;
    if constexpr (DYNAMIC) {
        i64 piece = warp_append(true, next_piece);
        t = piece * blockDim.x;
        t_end = min(n, t + blockDim.x);
        if (t >= n) return;
        s = bseed[piece];
    } else {
        i64 warp = (blockIdx.x * (i64)blockDim.x + threadIdx.x) >> 5;
        t = warp * per_warp + (threadIdx.x & 31);
        t_end = min(n, (warp + 1) * per_warp);
        if (t >= t_end) return;
        s = wseed[warp];
    }
    u32 c = chunk_of(chunk_start, n_chunks, h0 + t);
    Dual A, B;
    i64 r = 0, q = 0, lim = 0;
    int sc = 0, mr = 0, br = 0, k = 0, end = 0, side = 2;  // side 2: no hit in hand
    for (;;) {
        if (side == 2) {
            if constexpr (DYNAMIC) {
                if (t >= t_end) {
                    i64 piece = warp_append(true, next_piece);
                    t = piece * blockDim.x;
                    t_end = min(n, t + blockDim.x);
                    if (t >= n) break;
                    s = bseed[piece];
                    c = chunk_of(chunk_start, n_chunks, h0 + t);
                }
            } else if (t >= t_end) {
                break;
            }
            i64 h = h0 + t;
            s = gallop(cum, s, n_slots - 1, h);
            while (c + 1 < (u32)n_chunks && chunk_start[c + 1] <= h) ++c;
            r = (i64)pos_table[lo[s] + h - (cum[s] - counts[s])] + size;
            q = (qpos ? qpos[s] : first + s / variants) + size;
            lim = min(ref_len - r, qry_len - q);
            end = (int)min(lim, (i64)cap);
            A.forward(ref, r);
            B.forward(qry, q);
            sc = mr = k = 0;
            side = 0;
        }
        if (k < end) {
            u64 z = (A.next() << 3) | B.next();
            int v = end - k;
            if (v < 8) {
                u64 keep = (1ull << (8 * v)) - 1;
                z = (z & keep) | (0x4040404040404040ull & ~keep);
            }
#pragma unroll
            for (int u = 0; u < 8; ++u) {
                sc += mat[((int)(z >> (8 * u)) & 127) * 32];
                mr = max(mr, sc);
            }
            k += 8;
        }
        bool stopped = mr - sc > xdrop;
        if (!stopped && k < end) continue;
        bool ok = stopped || end == lim;
        if (side == 0 && ok) {  // the right side is settled: walk left
            br = mr;
            lim = min(r, q);
            end = (int)min(lim, (i64)cap);
            A.backward(ref, r);
            B.backward(qry, q);
            sc = mr = k = 0;
            side = 1;
            continue;
        }
        bool keep = !(ok && side == 1 && br + mr < thresh);
        u32 slot = warp_append(keep, n_cand);
        if (keep) {
            cand[slot] = ((u64)r << 32) | (u64)q;
            cand_tag[slot] = c;
        }
        side = 2;
        t += DYNAMIC ? 1 : 32;
    }
}

#define REFILL_ARGS ref, qry, ref_len, qry_len, mat_g, xdrop, thresh, cap, pos_table, lo, cum, \
    counts, bseed, qpos, pairs, tags, chunk_start, n_chunks, h0, n, first, variants, size,     \
    per_warp, n_slots, wseed, next_piece, cand, cand_tag, n_cand

extern "C" __global__ void filter_refill(REFILL_PARAMS) { refill_body<false>(REFILL_ARGS); }

// The same with at most 40 registers a thread: 6 blocks of 256 threads an SM instead of 5.
extern "C" __global__ void __launch_bounds__(256, 6) filter_refill6(REFILL_PARAMS)
{
    refill_body<false>(REFILL_ARGS);
}

extern "C" __global__ void __launch_bounds__(256, 6) filter_refill_dyn(REFILL_PARAMS)
{
    refill_body<true>(REFILL_ARGS);
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
