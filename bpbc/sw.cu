// Bit-sliced Smith-Waterman screen on the GPU: 32 instances per 32-bit word.
//
// A "chain" of P lanes (P divides 32, so a chain never spans two warps)
// sweeps a stream of word groups; lane p holds R consecutive pattern rows in
// registers and runs one column behind lane p-1 (a wavefront), receiving the
// H and F of the row above through __shfl_up_sync. Patterns longer than P*R
// rows are cut into stripes whose boundary row goes through global memory.
// A group's best score travels down the chain at its last column.
//
// The cell update is the CPU engine's (bpbc/cpu_engine.py): a two's
// complement adder for the diagonal with a per-lane addend, borrow-chain
// comparators, and an overflow flag instead of saturation. Scoring constants
// and the plane count B are template parameters, so every constant bit folds
// away and each 3-input gate becomes one LOP3.

#define FULL_MASK 0xffffffffu

template <int B>
__device__ __forceinline__ unsigned greater(const unsigned (&x)[B], const unsigned (&y)[B]) {
    // all-ones in lanes where x > y: the borrow out of y - x
    unsigned borrow = ~y[0] & x[0];
#pragma unroll
    for (int k = 1; k < B; ++k) borrow = (~y[k] & (x[k] | borrow)) | (x[k] & borrow);
    return borrow;
}

template <int B>
__device__ __forceinline__ void select_into(unsigned (&dst)[B], const unsigned (&x)[B], const unsigned (&y)[B],
                                            unsigned mask) {
    // dst = mask ? x : y
#pragma unroll
    for (int k = 0; k < B; ++k) dst[k] = y[k] ^ ((x[k] ^ y[k]) & mask);
}

template <int B, int C>
__device__ __forceinline__ unsigned subtract_const(unsigned (&dst)[B], const unsigned (&x)[B]) {
    // dst = x - C (mod 2^B); returns all-ones where x < C
    unsigned borrow = 0;
#pragma unroll
    for (int k = 0; k < B; ++k) {
        const unsigned c = ((C >> k) & 1) ? FULL_MASK : 0u;
        dst[k] = x[k] ^ c ^ borrow;
        borrow = (~x[k] & (c | borrow)) | (c & borrow);
    }
    return (C >= (1 << B)) ? FULL_MASK : borrow;
}

template <int B, int R, int P, int MA, int MI, int OE, int EX>
__global__ void __launch_bounds__(128) sw_screen(
    const unsigned* __restrict__ planes,       // (G, L, 3): low bit, high bit, valid
    const int* __restrict__ group_length,      // (G,), >= 1
    const unsigned char* __restrict__ patterns, // oriented patterns' IUPAC masks, back to back
    const long long* __restrict__ pattern_start, // (K + 1,): pattern k = patterns[start[k]:start[k + 1]]
    unsigned* __restrict__ stripe_columns,     // (G, L, 2B): H, F below a stripe (one pattern per launch)
    unsigned* __restrict__ stripe_best,        // (G, B + 1): best, flag of a stripe
    unsigned* __restrict__ out_best,           // (K, G, B)
    unsigned* __restrict__ out_flag,           // (K, G)
    int groups, int length, int chains) {
    static_assert(32 % P == 0, "a chain must not span warps");
    constexpr unsigned LIMIT_MASK = (1u << B) - 1u;
    constexpr bool MATCH_BIG = MA >= (1 << B);   // every match overflows
    constexpr bool MISMATCH_OK = MI < (1 << B);  // a mismatch can stay >= 0
    constexpr unsigned ADD_MATCH = MA & LIMIT_MASK;
    constexpr unsigned ADD_MISMATCH = MISMATCH_OK ? (((1u << B) - MI) & LIMIT_MASK) : ADD_MATCH;

    // one grid row per oriented pattern: every pattern and strand in one launch
    const unsigned char* pattern = patterns + pattern_start[blockIdx.y];
    const int m = (int)(pattern_start[blockIdx.y + 1] - pattern_start[blockIdx.y]);
    const int stripes = (m + P * R - 1) / (P * R);
    out_best += (size_t)blockIdx.y * groups * B;
    out_flag += (size_t)blockIdx.y * groups;
    const int thread = blockIdx.x * blockDim.x + threadIdx.x;
    const int chain = thread / P;
    const int lane = thread % P;
    if (__all_sync(FULL_MASK, chain >= chains)) return;  // whole warp idle

    for (int stripe = 0; stripe < stripes; ++stripe) {
        unsigned pa[R], pc[R], pg[R], pt[R];
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int row = (stripe * P + lane) * R + r;
            const unsigned mask = row < m ? pattern[row] : 0u;  // padding rows never match
            pa[r] = (mask & 1) ? FULL_MASK : 0u;
            pc[r] = (mask & 2) ? FULL_MASK : 0u;
            pg[r] = (mask & 4) ? FULL_MASK : 0u;
            pt[r] = (mask & 8) ? FULL_MASK : 0u;
        }
        unsigned H[R][B], E[R][B], best[B], out_h[B], out_f[B], prev_in_h[B], pub_best[B];
        unsigned flag = 0, pub_flag = 0;
#pragma unroll
        for (int k = 0; k < B; ++k) {
            best[k] = out_h[k] = out_f[k] = prev_in_h[k] = pub_best[k] = 0;
#pragma unroll
            for (int r = 0; r < R; ++r) H[r][k] = E[r][k] = 0;
        }
        int wait = lane;  // lane p starts p steps late: the wavefront skew
        int g = chain, j = 0;
        bool done = chain >= chains || g >= groups;
        int len = done ? 1 : group_length[g];
        __syncwarp();  // the previous stripe's boundary writes are visible

        while (__any_sync(FULL_MASK, !done)) {
            const bool active = wait == 0 && !done;
            unsigned in_h[B], in_f[B];
#pragma unroll
            for (int k = 0; k < B; ++k) {
                in_h[k] = __shfl_up_sync(FULL_MASK, out_h[k], 1, P);
                in_f[k] = __shfl_up_sync(FULL_MASK, out_f[k], 1, P);
            }
            if (lane == 0) {
                const unsigned* above = stripe_columns + ((size_t)g * length + j) * (2 * B);
#pragma unroll
                for (int k = 0; k < B; ++k) {
                    in_h[k] = (active && stripe > 0) ? above[k] : 0u;
                    in_f[k] = (active && stripe > 0) ? above[B + k] : 0u;
                }
            }
            unsigned lo = 0, hi = 0, va = 0;
            if (active) {
                const unsigned* column = planes + ((size_t)g * length + j) * 3;
                lo = column[0];
                hi = column[1];
                va = column[2];
                if (j == 0) {  // a new group: column -1 and the gap states are 0
#pragma unroll
                    for (int k = 0; k < B; ++k) {
                        best[k] = prev_in_h[k] = 0;
#pragma unroll
                        for (int r = 0; r < R; ++r) H[r][k] = E[r][k] = 0;
                    }
                    flag = 0;
                }
            }
            unsigned hd[B], f[B];
#pragma unroll
            for (int k = 0; k < B; ++k) {
                hd[k] = prev_in_h[k];
                f[k] = in_f[k];
                prev_in_h[k] = in_h[k];
            }
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const unsigned low_pair = (lo & pc[r]) | (~lo & pa[r]);
                const unsigned high_pair = (lo & pt[r]) | (~lo & pg[r]);
                const unsigned match = va & ((hi & high_pair) | (~hi & low_pair));
                // diagonal: hd + (match ? MA : -MI), one B-bit adder
                unsigned d[B], carry = 0;
#pragma unroll
                for (int k = 0; k < B; ++k) {
                    const bool a = (ADD_MATCH >> k) & 1, b = (ADD_MISMATCH >> k) & 1;
                    const unsigned s = a ? (b ? FULL_MASK : match) : (b ? ~match : 0u);
                    d[k] = hd[k] ^ s ^ carry;
                    carry = (hd[k] & s) | (carry & (hd[k] ^ s));
                }
                flag |= match & (MATCH_BIG ? FULL_MASK : carry);  // true score >= 2^B
                const unsigned diag_ok = MISMATCH_OK ? (match | carry) : match;
                unsigned t[B], h[B];
                select_into<B>(t, d, E[r], greater<B>(d, E[r]) & diag_ok);
                select_into<B>(h, t, f, greater<B>(t, f));
                select_into<B>(best, h, best, greater<B>(h, best));
                unsigned hoe[B], ye[B], yf[B];
                const unsigned hoe_keep = ~subtract_const<B, OE>(hoe, h);
#pragma unroll
                for (int k = 0; k < B; ++k) hoe[k] &= hoe_keep;
                const unsigned e_ok = ~subtract_const<B, EX>(ye, E[r]);
                const unsigned f_ok = ~subtract_const<B, EX>(yf, f);
#pragma unroll
                for (int k = 0; k < B; ++k) hd[k] = H[r][k];  // diagonal of the next row
                select_into<B>(E[r], ye, hoe, greater<B>(ye, hoe) & e_ok);
                select_into<B>(f, yf, hoe, greater<B>(yf, hoe) & f_ok);
#pragma unroll
                for (int k = 0; k < B; ++k) H[r][k] = h[k];
            }
#pragma unroll
            for (int k = 0; k < B; ++k) {
                out_h[k] = H[R - 1][k];
                out_f[k] = f[k];
            }
            if (active && lane == P - 1 && stripe + 1 < stripes) {
                unsigned* below = stripe_columns + ((size_t)g * length + j) * (2 * B);
#pragma unroll
                for (int k = 0; k < B; ++k) {
                    below[k] = out_h[k];
                    below[B + k] = out_f[k];
                }
            }
            const bool group_end = active && j == len - 1;
            if (__any_sync(FULL_MASK, group_end)) {
                unsigned in_best[B], in_flag = __shfl_up_sync(FULL_MASK, pub_flag, 1, P);
#pragma unroll
                for (int k = 0; k < B; ++k) in_best[k] = __shfl_up_sync(FULL_MASK, pub_best[k], 1, P);
                if (group_end) {
                    if (lane == 0) {
                        const unsigned* above = stripe_best + (size_t)g * (B + 1);
#pragma unroll
                        for (int k = 0; k < B; ++k) in_best[k] = stripe > 0 ? above[k] : 0u;
                        in_flag = stripe > 0 ? above[B] : 0u;
                    }
                    select_into<B>(pub_best, best, in_best, greater<B>(best, in_best));
                    pub_flag = flag | in_flag;
                    if (lane == P - 1) {
                        const bool last = stripe + 1 == stripes;
                        unsigned* target = last ? out_best + (size_t)g * B : stripe_best + (size_t)g * (B + 1);
#pragma unroll
                        for (int k = 0; k < B; ++k) target[k] = pub_best[k];
                        if (last) out_flag[g] = pub_flag;
                        else target[B] = pub_flag;
                    }
                }
            }
            if (wait > 0) {
                --wait;
            } else if (!done && ++j == len) {
                j = 0;
                g += chains;
                done = g >= groups;
                if (!done) len = group_length[g];
            }
        }
    }
}

// Words that hold a passing lane: bit i of mask[k * G + g] is set when lane
// i of group g scores at least thresholds[k] on pattern k, or overflowed,
// and is a real instance (i < n - 32 g). Only these words leave the device.
extern "C" __global__ void hit_words(const unsigned* __restrict__ best,  // (K, G, B)
                                     const unsigned* __restrict__ flag,  // (K, G)
                                     const int* __restrict__ thresholds, // (K,), < 2^B
                                     unsigned* __restrict__ mask,        // (K, G)
                                     int patterns, int groups, int planes, long long n) {
    const long long total = (long long)patterns * groups;
    for (long long index = blockIdx.x * (long long)blockDim.x + threadIdx.x; index < total;
         index += (long long)gridDim.x * blockDim.x) {
        const int k = (int)(index / groups);
        const int g = (int)(index % groups);
        const int t = thresholds[k];
        unsigned greater = 0, equal = FULL_MASK;  // best vs t, from the top plane down
        for (int b = planes - 1; b >= 0; --b) {
            const unsigned x = best[index * planes + b];
            const unsigned tb = ((t >> b) & 1) ? FULL_MASK : 0u;
            greater |= equal & x & ~tb;
            equal &= ~(x ^ tb);
        }
        const long long left = n - 32LL * g;
        const unsigned valid = left >= 32 ? FULL_MASK : ((1u << left) - 1u);
        mask[index] = (greater | equal | flag[index]) & valid;
    }
}
