// A word-wise Smith-Waterman peer of bpbc for Hopper, built on DPX.
//
// Same problem as bpbc's screen: many reads against one pattern (IUPAC masks
// allowed: a valid read base matches when its bit is in the pattern mask; an
// invalid base, code 4, matches nothing), local alignment, affine gaps (a gap
// of k costs OE + (k - 1) EX with OE = open + extend), every instance's exact
// maximum score.
//
// Two instances per thread: two reads share each 32-bit register as signed
// 16-bit lanes (s16x2), so one DPX instruction advances two cells. A chain of
// P threads (P divides 32) works on one read pair at a time, as CUDASW++4.0's
// DPX kernels work on one subject pair per thread group (with the roles of
// query and subject swapped: here the pattern is in registers and the read
// streams through): thread p keeps pattern rows [pR, pR + R) in registers (H
// and E per row) and runs one column behind thread p - 1 (a wavefront),
// receiving that thread's bottom H and the F that enters its first row through
// __shfl_up_sync. Every pair takes L + P - 1 steps, the same for all threads
// of a warp, so the loop needs no per-column bookkeeping: a thread outside its
// pair's columns reads the invalid code, which keeps an all-zero state at zero
// before the pair and cannot raise the best score after it. The pair's best
// is reduced over the chain once at its end; the state is reset between pairs
// outside the column loop. Chain c takes pairs c, c + chains, ...
//
// The cell (all values s16x2, >= 0; gap states are clamped at 0, which
// changes no H because H = max(0, ...)):
//     a  = max(Hdiag + s, E)            __viaddmax_s16x2
//     H  = max(a, F, 0)                 __vimax_s16x2_relu
//     t  = H - OE                       __vadd2
//     E' = max(E - EX, t, 0)            __viaddmax_s16x2_relu  (next column)
//     F' = max(F - EX, t, 0)            __viaddmax_s16x2_relu  (next row)
//     best = max(best, H, H of the next row)   __vimax3_s16x2, one per two rows
// Five DPX instructions per two cells, plus the score s:
//   SCORE == 0: s of four rows from one 128-bit shared-memory load, a table of
//               (read pair code, pattern row) -> s16x2 built per block;
//   SCORE == 1: s in registers: q = rowmask & onehot pair (LOP3), then
//               s = min(q - MI, MA) (__viaddmin_s16x2): two instructions.
// U: the column loop unrolled U times (2 lets the compiler alternate
// registers instead of moving H and E between iterations).
//
// Read pairs come as one byte per column, c0 + 5 c1 (codes 0..3 = ACGT, 4 =
// invalid or padding), pairs (K, L) row-major; the last pair of an odd count
// holds an all-invalid second read (score 0, not written).

#define FULL_MASK 0xffffffffu
constexpr int PEER_THREADS = 256;
constexpr int CODES = 25;        // (c0, c1), c in 0..4
constexpr int INVALID_PAIR = CODES - 1;
constexpr int ONEHOT_SHIFT = 10; // SCORE == 1: base bits at 10..13 of each half: q >= 1024 on a match

__device__ __forceinline__ constexpr unsigned splat16(int v) { return (unsigned)(v & 0xffff) * 0x00010001u; }

template <int R>
struct TableShape {
    static constexpr int LANE_STRIDE = (R + 3) / 4 * 4 + 4;  // words per thread's rows, padded (banks)
};

template <int R, int P, int MA, int MI, int OE, int EX, int SCORE, int U>
__global__ void __launch_bounds__(PEER_THREADS) dpx_sw(
    const unsigned char* __restrict__ pairs,    // (K, L) pair codes
    const unsigned char* __restrict__ pattern,  // m IUPAC masks (bit 0 A, 1 C, 2 G, 3 T)
    int m, long long pair_count, int length, long long n, int chains,
    int* __restrict__ scores)                   // (n,)
{
    static_assert(32 % P == 0, "a chain must not span warps");
    static_assert(SCORE != 1 || MA + MI <= (1 << ONEHOT_SHIFT), "score trick needs q - MI >= MA on a match");
    constexpr int LANE_STRIDE = TableShape<R>::LANE_STRIDE;
    constexpr int CODE_STRIDE = P * LANE_STRIDE + 4;
    extern __shared__ __align__(16) unsigned table[];

    const int thread = blockIdx.x * blockDim.x + threadIdx.x;
    const int chain = thread / P;
    const int lane = thread % P;

    // ---- per-block tables
    if constexpr (SCORE == 0) {
        for (int idx = threadIdx.x; idx < CODES * P * R; idx += blockDim.x) {
            const int code = idx / (P * R), row = idx % (P * R);
            const int c0 = code % 5, c1 = code / 5;
            const unsigned mask = row < m ? pattern[row] : 0u;  // padding rows never match
            const int s0 = (c0 < 4 && ((mask >> c0) & 1)) ? MA : -MI;
            const int s1 = (c1 < 4 && ((mask >> c1) & 1)) ? MA : -MI;
            table[code * CODE_STRIDE + (row / R) * LANE_STRIDE + row % R] =
                ((unsigned)s0 & 0xffffu) | ((unsigned)s1 << 16);
        }
    } else {
        for (int idx = threadIdx.x; idx < CODES; idx += blockDim.x) {
            const int c0 = idx % 5, c1 = idx / 5;
            const unsigned b0 = c0 < 4 ? 1u << (ONEHOT_SHIFT + c0) : 0u;
            const unsigned b1 = c1 < 4 ? 1u << (ONEHOT_SHIFT + c1) : 0u;
            table[idx] = b0 | (b1 << 16);
        }
    }
    __syncthreads();
    if (__all_sync(FULL_MASK, chain >= chains)) return;  // whole warp idle

    unsigned M[SCORE == 1 ? R : 1];
    if constexpr (SCORE == 1) {
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int row = lane * R + r;
            const unsigned mask = row < m ? pattern[row] : 0u;
            M[r] = (mask << ONEHOT_SHIFT) * 0x00010001u;
        }
    }
    const unsigned* lane_table = table + lane * LANE_STRIDE;
    const int steps = length + P - 1;
    const long long rounds = (pair_count + chains - 1) / chains;  // the same for every chain

    for (long long round = 0; round < rounds; ++round) {
        const long long g = chain + round * chains;
        const bool real = chain < chains && g < pair_count;
        const unsigned char* column = pairs + (real ? g * (long long)length : 0);
        unsigned H[R], E[R];
#pragma unroll
        for (int r = 0; r < R; ++r) H[r] = E[r] = 0;
        unsigned best = 0, out_h = 0, out_f = 0, prev_in_h = 0;
        int j = -lane;  // this thread's column at step 0
        int code = real && j == 0 ? column[0] : INVALID_PAIR;

#pragma unroll U
        for (int step = 0; step < steps; ++step, ++j) {
            const int next = (real && (unsigned)(j + 1) < (unsigned)length) ? column[j + 1] : INVALID_PAIR;
            unsigned in_h = 0, in_f = 0;
            if constexpr (P > 1) {
                in_h = __shfl_up_sync(FULL_MASK, out_h, 1, P);
                in_f = __shfl_up_sync(FULL_MASK, out_f, 1, P);
                if (lane == 0) in_h = in_f = 0;  // row -1: H = 0, no gap enters
            }
            unsigned hd = prev_in_h, f = in_f;
            prev_in_h = in_h;

            unsigned s[R];
            if constexpr (SCORE == 0) {
                const unsigned* scores_row = lane_table + code * CODE_STRIDE;
#pragma unroll
                for (int r = 0; r < R; r += 4) {
                    if (r + 4 <= R) {
                        const uint4 v = *reinterpret_cast<const uint4*>(scores_row + r);
                        s[r] = v.x; s[r + 1] = v.y; s[r + 2] = v.z; s[r + 3] = v.w;
                    } else {
#pragma unroll
                        for (int k = r; k < R; ++k) s[k] = scores_row[k];
                    }
                }
            } else {
                const unsigned onehot = table[code];
#pragma unroll
                for (int r = 0; r < R; ++r)
                    s[r] = __viaddmin_s16x2(M[r] & onehot, splat16(-MI), splat16(MA));
            }

            unsigned h_even = 0;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const unsigned a = __viaddmax_s16x2(hd, s[r], E[r]);
                const unsigned h = __vimax_s16x2_relu(a, f);
                hd = H[r];
                H[r] = h;
                const unsigned t = __vadd2(h, splat16(-OE));
                E[r] = __viaddmax_s16x2_relu(E[r], splat16(-EX), t);
                f = __viaddmax_s16x2_relu(f, splat16(-EX), t);
                if (r & 1) best = __vimax3_s16x2(best, h_even, h);
                else if (r == R - 1) best = __vimax_s16x2_relu(best, h);
                else h_even = h;
            }
            out_h = H[R - 1];
            out_f = f;
            code = next;
        }
#pragma unroll
        for (int offset = 1; offset < P; offset <<= 1)
            best = __vimax_s16x2_relu(best, __shfl_xor_sync(FULL_MASK, best, offset, P));
        if (real && lane == 0) {
            const long long first = 2 * g;
            scores[first] = (int)(short)(best & 0xffffu);
            if (first + 1 < n) scores[first + 1] = (int)(short)(best >> 16);
        }
    }
}

// Codes (N, L) uint8 (0..3, 4 invalid) -> pair codes (ceil(N / 2), L): c0 + 5 c1.
extern "C" __global__ void to_pairs(const unsigned char* __restrict__ codes, unsigned char* __restrict__ pairs,
                                    long long n, int length, long long pair_count) {
    const long long total = pair_count * length;
    for (long long index = blockIdx.x * (long long)blockDim.x + threadIdx.x; index < total;
         index += (long long)gridDim.x * blockDim.x) {
        const long long g = index / length;
        const int j = (int)(index % length);
        const unsigned c0 = min((unsigned)codes[(2 * g) * length + j], 4u);
        const unsigned c1 = 2 * g + 1 < n ? min((unsigned)codes[(2 * g + 1) * length + j], 4u) : 4u;
        pairs[index] = (unsigned char)(c0 + 5 * c1);
    }
}
