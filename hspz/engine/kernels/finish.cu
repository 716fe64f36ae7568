// The end of a group's extension on the device: the hits the capped walks left unfinished, as
// chain walks (one thread per hit, each walking until it merges into the next hit's walk) or, for
// a diagonal with a walk past the cap, as hspz/xdrop.py's `_extend_groups` sweep (one thread per
// diagonal); then the four match counts the entropy gate needs (hspz/hsp.py's `_entropy`, one
// thread per distinct HSP).  The host then only takes logarithms of the counts: its `log` is the
// one both backends share.  Integer arithmetic throughout, so the results equal the host's.

typedef unsigned char u8;
typedef long long i64;

// SCRATCH (the preamble, hspz/engine/cuda_source.py): i64 arrays per hit that gpu.py allocates
// for sweep_diagonals, laid out below as the sweep's nine, then its two outputs
static_assert(SCRATCH == 11, "sweep_diagonals lays out 11 scratch arrays per hit");

// One sweep of the diagonal `diag` in direction `dir` for the n anchors of R[0..n) (sorted
// ascending): right walks (dir = 1) score from R[j], left walks (dir = -1) from R[j] - 1, taken
// in traversal order.  Positions outside [lo_b, hi_b) end every walk.  out_m[j] and out_p[j]
// get the traversal's j-th anchor's best score and the position of its maximum (first - dir when
// no base raised it).  `s` holds SCRATCH arrays of `stride` elements; the anchors use [0, n).
__device__ void sweep(const u8* __restrict__ ref, const u8* __restrict__ qry,
                      const int* __restrict__ mat, int xdrop, i64 diag, const i64* __restrict__ R,
                      i64 n, int dir, i64 lo_b, i64 hi_b, i64* s, i64 stride)
{
    i64 *st_id = s, *st_max = s + stride, *st_pos = s + 2 * stride, *base = s + 3 * stride;
    i64 *parent = s + 4 * stride, *merge_max = s + 5 * stride, *fin_max = s + 6 * stride;
    i64 *fin_pos = s + 7 * stride, *events = s + 8 * stride;
    i64 *out_m = s + 9 * stride, *out_p = s + 10 * stride;
#define FIRST(j) (dir > 0 ? R[j] : R[n - 1 - (j)] - 1)
    i64 n_events = 0, bot = 0, top = 0, g = 0, i = 0, p = FIRST(0);
    while (i < n || top > bot) {
        if (top == bot && (p - FIRST(i)) * dir < 0) p = FIRST(i);
        while (i < n && FIRST(i) == p) {
            base[i] = g;
            parent[i] = -1;
            if (top > bot && st_max[top - 1] == g) {  // starts on a walk at its maximum
                parent[i] = st_id[top - 1];
                merge_max[i] = g;
                fin_pos[i] = p - dir;
                events[n_events++] = i;
            } else {
                st_id[top] = i;
                st_max[top] = g;
                st_pos[top] = p - dir;
                top++;
            }
            i++;
        }
        if (p < lo_b || p >= hi_b) {  // the sequence ends every live walk
            for (i64 j = bot; j < top; j++) {
                fin_max[st_id[j]] = st_max[j];
                fin_pos[st_id[j]] = st_pos[j];
            }
            bot = top;
            if (i < n) p = FIRST(i);
            continue;
        }
        g += mat[ref[p] * 8 + qry[p - diag]];
        i64 keep = top;
        while (keep > bot && st_max[keep - 1] <= g) {
            keep--;
            if (st_max[keep] < g) {
                st_max[keep] = g;
                st_pos[keep] = p;
            }
        }
        if (top - keep > 1) {  // walks whose maxima met: the oldest of them carries on
            for (i64 j = keep + 1; j < top; j++) {
                i64 c = st_id[j];
                parent[c] = st_id[keep];
                merge_max[c] = g;
                fin_pos[c] = st_pos[j];
                events[n_events++] = c;
            }
            top = keep + 1;
        }
        while (top > bot && st_max[bot] - g > xdrop) {  // the oldest walk's drawdown ends it
            fin_max[st_id[bot]] = st_max[bot];
            fin_pos[st_id[bot]] = st_pos[bot];
            bot++;
        }
        p += dir;
    }
#undef FIRST
    for (i64 e = n_events - 1; e >= 0; e--) {  // merged walks copy their carrier's outcome
        i64 c = events[e], k = parent[c];
        if (fin_max[k] > merge_max[c]) fin_pos[c] = fin_pos[k];
        fin_max[c] = fin_max[k];
    }
    for (i64 j = 0; j < n; j++) {
        out_m[j] = fin_max[j] - base[j];
        out_p[j] = fin_pos[j];
    }
}

// One thread per diagonal group [starts[t], starts[t + 1]) of hits sorted by diagonal then R:
// the right and the left sweep, then each hit's (score, ref start, query start, len), as
// `extend_sorted` gives them.  scratch: SCRATCH * stride i64, stride >= the number of hits.
extern "C" __global__ void sweep_diagonals(
    const u8* __restrict__ ref, const u8* __restrict__ qry, i64 ref_len, i64 qry_len,
    const int* __restrict__ mat, int xdrop, const i64* __restrict__ R, const i64* __restrict__ Q,
    const i64* __restrict__ starts, i64 n_groups, i64* scratch, i64 stride,
    i64* __restrict__ score, i64* __restrict__ rs, i64* __restrict__ qs, i64* __restrict__ len)
{
    i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= n_groups) return;
    i64 a = starts[t], n = starts[t + 1] - a;
    i64 d = R[a] - Q[a];
    i64 lo = d > 0 ? d : 0, hi = qry_len + d < ref_len ? qry_len + d : ref_len;
    i64* s = scratch + a;
    const i64 *out_m = s + 9 * stride, *out_p = s + 10 * stride;
    sweep(ref, qry, mat, xdrop, d, R + a, n, 1, lo, hi, s, stride);
    for (i64 j = 0; j < n; j++) {
        score[a + j] = out_m[j];
        len[a + j] = out_p[j] - R[a + j];
    }
    sweep(ref, qry, mat, xdrop, d, R + a, n, -1, lo, hi, s, stride);
    for (i64 j = 0; j < n; j++) {
        i64 k = a + n - 1 - j, pl = R[k] - out_p[j];
        score[k] += out_m[j];
        rs[k] = R[k] - pl;
        qs[k] = Q[k] - pl;
        len[k] += pl;
    }
}

// One walk per hit, all in parallel, for hits in walking order (sorted by diagonal, then by R
// ascending for right walks, descending for left ones): the walk in direction `dir` (right walks
// score from R, left walks from R - 1) that stops at the first of
//   - its x-drop end or the sequence's end (state 0: finished, its best `m` and position `pos`);
//   - the first position, at or past where the next hit's walk begins (the following hit, if on
//     the same diagonal), at which it sits at its maximum (state 1: merged).  From there both walks see the same scores from equal
//     maxima, so they end alike (hspz/xdrop.py's sweep rests on the same fact); `m` is its best
//     then, `off` its score just before the next walk's first base, `pos` its best position;
//   - `cap` bases (state 2: sweep_diagonals takes the whole diagonal instead).
// Chains of merged walks are resolved afterwards (hspz/xdrop.py's `resolve_chains`).  Dense hits on a long
// HSP each walk a few bases to the next hit, so a diagonal costs its length once, in parallel.
extern "C" __global__ void chain_walks(
    const u8* __restrict__ ref, const u8* __restrict__ qry, i64 ref_len, i64 qry_len,
    const int* __restrict__ mat, int xdrop, const i64* __restrict__ R, const i64* __restrict__ Q,
    i64 n, int dir, i64 cap, u8* __restrict__ state, i64* __restrict__ best,
    i64* __restrict__ best_pos, i64* __restrict__ off)
{
    i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= n) return;
    i64 d = R[t] - Q[t];
    i64 lo = d > 0 ? d : 0, hi = qry_len + d < ref_len ? qry_len + d : ref_len;
    i64 nx = t + 1;
    bool has_next = nx < n && R[nx] - Q[nx] == d;
    i64 shift = dir > 0 ? 0 : 1;
    i64 p = R[t] - shift, f = has_next ? R[nx] - shift : 0;
    i64 s = 0, m = 0, pos = p - dir, o = 0;
    u8 st = 0;
    for (i64 k = 0;; k++) {
        if (has_next && p == f) o = s;
        if (has_next && (p - f) * dir >= 0 && m == s) {
            st = 1;
            break;
        }
        if (p < lo || p >= hi) break;
        if (k == cap) {
            st = 2;
            break;
        }
        s += mat[ref[p] * 8 + qry[p - d]];
        if (s > m) {
            m = s;
            pos = p;
        }
        if (m - s > xdrop) break;
        p += dir;
    }
    state[t] = st;
    best[t] = m;
    best_pos[t] = pos;
    off[t] = o;
}

// counts[4 i + c]: how many of HSP i's len + 1 bases match with the unmasked base c, for the HSPs
// whose score lies in [lo_t, hi_t] (the only ones whose entropy is taken); zero elsewhere.
extern "C" __global__ void match_counts(
    const u8* __restrict__ ref, const u8* __restrict__ qry, const i64* __restrict__ total,
    const i64* __restrict__ rs, const i64* __restrict__ qs, const i64* __restrict__ len, i64 n,
    i64 lo_t, i64 hi_t, i64* __restrict__ counts)
{
    i64 t = blockIdx.x * (i64)blockDim.x + threadIdx.x;
    if (t >= n) return;
    i64 c[4] = {0, 0, 0, 0};
    if (total[t] >= lo_t && total[t] <= hi_t) {
        const u8 *r = ref + rs[t], *q = qry + qs[t];
        for (i64 k = 0; k <= len[t]; k++) {
            u8 b = r[k];
            if (b < 4 && b == q[k]) c[b]++;
        }
    }
    for (int b = 0; b < 4; b++) counts[4 * t + b] = c[b];
}
