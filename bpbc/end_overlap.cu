// The bit-sliced end-overlap decision on the GPU: does a read have a passing
// partial adapter at its end? The same DP, variable change and floor as the
// CPU pass (bpbc/end_overlap.py, whose module docstring says why it is
// exact), 32 reads per 32-bit word: one thread runs one task over 32 reads.
// Two kernels share the DP (decide_lanes) and differ in where a row's bases
// come from: end_overlap_decide reads sequence bytes (any 32 reads of a
// list), end_overlap_decide_planes the bit planes the screen's batch already
// holds on the device (bpbc/gpu_engine.py, PreparedReads: a word group's 32
// reads, sorted by length), so a GPU run uploads nothing again.
//
// Row i >= 1 of the DP holds each read's i-th base from its end (from its
// start for a 5' task, whose pattern columns are reversed already), so every
// read's last base is row 1 and one row index serves the 32 lanes. A cell of
// column c stores u = max(0, v + match x (m - c) + 1) in B bit planes: a
// diagonal step keeps u on a match and takes KD = match + mismatch off on a
// mismatch, a vertical gap (E) KEO = open + extend or KEE = extend, a
// horizontal one (F) KFO = open + extend + match or KFE = extend + match; H
// is the maximum of the three. A lane passes where column m holds u >= 1 in
// a row i <= its read's length. A thread stops where each of its 32 lanes
// has passed, has no cell above 0 left, or has run past its read's start.
//
// Compiled by NVRTC through CuPy (bpbc/end_overlap.py, gpu_flags and
// launch_plane_flags), one instance per plane count, scoring and longest pattern (MAXCOL >= the
// longest task's m + 1): the subtractions fold their constants, the state of
// a thread (2 x MAXCOL x B words) is a local array.

template <int B, int K>
__device__ __forceinline__ void sat_sub(unsigned (&dst)[B], const unsigned (&x)[B]) {
    // dst = max(x - K, 0), plane by plane
    if (K >= (1 << B)) {
#pragma unroll
        for (int k = 0; k < B; ++k) dst[k] = 0u;
        return;
    }
    unsigned borrow = 0u;
#pragma unroll
    for (int k = 0; k < B; ++k) {
        const unsigned xk = x[k];
        if ((K >> k) & 1) {
            dst[k] = ~(xk ^ borrow);
            borrow = ~xk | borrow;
        } else {
            dst[k] = xk ^ borrow;
            borrow = ~xk & borrow;
        }
    }
#pragma unroll
    for (int k = 0; k < B; ++k) dst[k] &= ~borrow;
}

template <int B>
__device__ __forceinline__ void vmax(unsigned (&dst)[B], const unsigned (&x)[B], const unsigned (&y)[B]) {
    // dst = max(x, y): x > y from the lowest plane up, then a select
    unsigned g = x[0] & ~y[0];
#pragma unroll
    for (int k = 1; k < B; ++k) g = (x[k] & ~y[k]) | (g & (x[k] | ~y[k]));
#pragma unroll
    for (int k = 0; k < B; ++k) dst[k] = y[k] ^ ((x[k] ^ y[k]) & g);
}

template <int B>
__device__ __forceinline__ unsigned any_plane(const unsigned (&x)[B]) {
    unsigned any = 0u;
#pragma unroll
    for (int k = 0; k < B; ++k) any |= x[k];
    return any;
}

// The DP of one task (m + 1 columns, column c holding the pattern mask the
// DP meets there; start values ``values``; band ``slack``) over 32 lanes,
// rows 1 .. width; ``rows.load(i, s, alive)`` gives row i's one-hot base
// words s[0..3] (bit q: lane q's base has code c; 0 for N and past the read)
// and the lanes whose read reaches row i. ``present``: the lanes with a
// read. Returns the lanes that pass.
template <int B, int KD, int KEO, int KEE, int KFO, int KFE, int MAXCOL, class Rows>
__device__ unsigned decide_lanes(const Rows& rows, unsigned present, int width, int m, int slack,
                                 const int* __restrict__ columns, const int* __restrict__ values) {
    unsigned H[MAXCOL][B];
    unsigned E[MAXCOL][B];
    for (int c = 0; c <= m; ++c) {
#pragma unroll
        for (int p = 0; p < B; ++p) {
            H[c][p] = ((values[c] >> p) & 1) ? ~0u : 0u;
            E[c][p] = 0u;
        }
    }
    unsigned found = values[m] > 0 ? present : 0u;

    for (int i = 1; i <= width; ++i) {
        unsigned s[4], alive;
        rows.load(i, s, alive);
        int left = i - slack;
        unsigned live = 0u;
        unsigned hd[B], hl[B], f[B];
        if (left <= 0) {  // column 0: E only
            unsigned hu[B], eu[B], eo[B], ee[B], e[B];
#pragma unroll
            for (int p = 0; p < B; ++p) {
                hu[p] = H[0][p];
                eu[p] = E[0][p];
            }
            sat_sub<B, KEO>(eo, hu);
            sat_sub<B, KEE>(ee, eu);
            vmax<B>(e, eo, ee);
#pragma unroll
            for (int p = 0; p < B; ++p) {
                H[0][p] = e[p];
                E[0][p] = e[p];
                hd[p] = hu[p];
                hl[p] = e[p];
                f[p] = 0u;
            }
            live |= any_plane<B>(e);
            left = 1;
        } else {
#pragma unroll
            for (int p = 0; p < B; ++p) {
                hd[p] = H[left - 1][p];
                hl[p] = 0u;
                f[p] = 0u;
            }
        }
        for (int c = left; c <= m; ++c) {
            const int mask = columns[c];
            const unsigned mw = ((mask & 1) ? s[0] : 0u) | ((mask & 2) ? s[1] : 0u) | ((mask & 4) ? s[2] : 0u) |
                                ((mask & 8) ? s[3] : 0u);
            unsigned hu[B], eu[B], dm[B], d[B], eo[B], ee[B], e[B], fo[B], fe[B], t[B], h[B];
#pragma unroll
            for (int p = 0; p < B; ++p) {
                hu[p] = H[c][p];
                eu[p] = E[c][p];
            }
            sat_sub<B, KD>(dm, hd);
#pragma unroll
            for (int p = 0; p < B; ++p) d[p] = dm[p] ^ ((hd[p] ^ dm[p]) & mw);
            sat_sub<B, KEO>(eo, hu);
            sat_sub<B, KEE>(ee, eu);
            vmax<B>(e, eo, ee);
            sat_sub<B, KFO>(fo, hl);
            sat_sub<B, KFE>(fe, f);
            vmax<B>(f, fo, fe);
            vmax<B>(t, d, e);
            vmax<B>(h, t, f);
#pragma unroll
            for (int p = 0; p < B; ++p) {
                H[c][p] = h[p];
                E[c][p] = e[p];
                hd[p] = hu[p];
                hl[p] = h[p];
            }
            live |= any_plane<B>(h);
        }
        found |= any_plane<B>(hl) & alive;
        if ((live & alive & ~found) == 0u) break;
    }
    return found;
}

// Rows from sequence bytes: lane q is read rows[first + q], bytes
// buf[seq_start[r]:][:lengths[r]], each through bit_table (bit c: the base
// has code c, 0-3).
struct ByteRows {
    const unsigned char* buf;
    const long long* seq_start;
    const long long* lengths;
    const long long* rows;
    const unsigned char* bit_table;
    long long first;
    int count;
    bool reverse;

    __device__ void load(int i, unsigned (&s)[4], unsigned& alive) const {
        s[0] = s[1] = s[2] = s[3] = alive = 0u;
        for (int q = 0; q < count; ++q) {
            const long long r = rows[first + q];
            const long long n = lengths[r];
            if (n >= i) {
                const unsigned bit = 1u << q;
                const unsigned char b = bit_table[buf[reverse ? seq_start[r] + i - 1 : seq_start[r] + n - i]];
                alive |= bit;
                s[0] |= (b & 1u) ? bit : 0u;
                s[1] |= (b & 2u) ? bit : 0u;
                s[2] |= (b & 4u) ? bit : 0u;
                s[3] |= (b & 8u) ? bit : 0u;
            }
        }
    }
};

// flags[rows[j] * tasks + k] = 1 where read rows[j] has a passing overlap in
// task k. Read r: bytes buf[seq_start[r]:][:lengths[r]], each through
// bit_table (bit c: the base has code c, 0-3). Task k: columns
// task_columns[task_starts[k]:task_starts[k + 1]] (m + 1 of them, column c
// holding the pattern mask the DP meets there, 0 unused), start values
// task_values (u of row 0, per column), end task_end[k] (1: the read's
// start), band task_slack[k]. Thread t: task t % tasks, reads 32 (t / tasks)
// .. +31 of rows.
template <int B, int KD, int KEO, int KEE, int KFO, int KFE, int MAXCOL>
__global__ void end_overlap_decide(const unsigned char* __restrict__ buf, const long long* __restrict__ seq_start,
                                   const long long* __restrict__ lengths, const long long* __restrict__ rows,
                                   long long n_rows, const unsigned char* __restrict__ bit_table,
                                   const int* __restrict__ task_columns, const long long* __restrict__ task_starts,
                                   const int* __restrict__ task_end, const int* __restrict__ task_slack,
                                   const int* __restrict__ task_values, int tasks, int* __restrict__ flags) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long groups = (n_rows + 31) / 32;
    if (thread >= groups * tasks) return;
    const int k = (int)(thread % tasks);
    const long long first = (thread / tasks) * 32;
    const int count = (int)min(32LL, n_rows - first);
    const int m = (int)(task_starts[k + 1] - task_starts[k]) - 1;
    if (m < 1 || m + 1 > MAXCOL) return;
    const int slack = task_slack[k];

    long long longest = 0;
    for (int q = 0; q < count; ++q) longest = max(longest, lengths[rows[first + q]]);
    const int width = (int)min(longest, (long long)(m + slack));
    const ByteRows source{buf, seq_start, lengths, rows, bit_table, first, count, task_end[k] == 1};
    const unsigned present = count == 32 ? ~0u : ((1u << count) - 1u);
    const unsigned found = decide_lanes<B, KD, KEO, KEE, KFO, KFE, MAXCOL>(
        source, present, width, m, slack, task_columns + task_starts[k], task_values + task_starts[k]);
    for (int q = 0; q < count; ++q) {
        if ((found >> q) & 1u) flags[rows[first + q] * tasks + k] = 1;
    }
}

// Rows from a word group's bit planes (transpose/cpu.py's layout: group[pos *
// 3 + p], plane 0 the code's low bit, 1 its high bit, 2 valid: code < 4,
// bit q lane q). Its reads are sorted by length, so lanes of one length
// form a few runs: run r is lanes run_first[r] .. run_first[r + 1] - 1, of length
// run_length[r]. Row i of a 3' task is column n - i of a read of length n
// (one load of the three planes per run), of a 5' task column i - 1 (one
// load for every lane).
struct PlaneRows {
    const unsigned* group;
    int run_first[33];
    int run_length[32];
    int runs;
    bool reverse;

    __device__ static unsigned lanes_from(int q) { return q >= 32 ? 0u : ~0u << q; }

    __device__ void load(int i, unsigned (&s)[4], unsigned& alive) const {
        s[0] = s[1] = s[2] = s[3] = alive = 0u;
        for (int r = 0; r < runs; ++r) {
            if (run_length[r] < i) continue;  // a read too short for row i
            const unsigned lanes = lanes_from(run_first[r]) & ~lanes_from(run_first[r + 1]);
            alive |= lanes;
            if (!reverse) add_column(run_length[r] - i, lanes, s);
        }
        if (reverse && alive) add_column(i - 1, alive, s);
    }

    __device__ void add_column(int column, unsigned lanes, unsigned (&s)[4]) const {
        const unsigned low = group[column * 3], high = group[column * 3 + 1];
        const unsigned valid = group[column * 3 + 2] & lanes;
        s[0] |= valid & ~high & ~low;
        s[1] |= valid & ~high & low;
        s[2] |= valid & high & ~low;
        s[3] |= valid & high & low;
    }
};

// found[g * tasks + k]: bit q set where read 32 g + q of the sorted batch has
// a passing overlap in task k (tasks as end_overlap_decide's). planes: (groups,
// width, 3) words of the batch's reads sorted by length (``lengths``, n of
// them, ascending). Thread t: task t % tasks, word group t / tasks. found
// starts at 0 (a task too long for MAXCOL leaves its words so).
template <int B, int KD, int KEO, int KEE, int KFO, int KFE, int MAXCOL>
__global__ void end_overlap_decide_planes(const unsigned* __restrict__ planes, int plane_width,
                                          const int* __restrict__ lengths, long long n,
                                          const int* __restrict__ task_columns,
                                          const long long* __restrict__ task_starts,
                                          const int* __restrict__ task_end, const int* __restrict__ task_slack,
                                          const int* __restrict__ task_values, int tasks,
                                          unsigned* __restrict__ found) {
    const long long thread = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long groups = (n + 31) / 32;
    if (thread >= groups * tasks) return;
    const int k = (int)(thread % tasks);
    const long long g = thread / tasks;
    const int count = (int)min(32LL, n - g * 32);
    const int m = (int)(task_starts[k + 1] - task_starts[k]) - 1;
    if (m < 1 || m + 1 > MAXCOL) return;
    const int slack = task_slack[k];

    PlaneRows source;
    source.group = planes + g * plane_width * 3;
    source.reverse = task_end[k] == 1;
    source.runs = 0;
    int longest = 0;
    for (int q = 0; q < count; ++q) {
        const int length = lengths[g * 32 + q];
        if (q == 0 || length != source.run_length[source.runs - 1]) {
            source.run_first[source.runs] = q;
            source.run_length[source.runs] = length;
            ++source.runs;
        }
        longest = max(longest, length);
    }
    source.run_first[source.runs] = count;
    const int width = min(longest, m + slack);
    const unsigned present = count == 32 ? ~0u : ((1u << count) - 1u);
    found[g * tasks + k] = decide_lanes<B, KD, KEO, KEE, KFO, KFE, MAXCOL>(
        source, present, width, m, slack, task_columns + task_starts[k], task_values + task_starts[k]);
}
