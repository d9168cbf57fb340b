// Bit transposes on the GPU, W = 32 (compiled by transpose/gpu.py with NVRTC).
//
// One warp handles one word group g of 32 instances; lane j is instance
// 32 * g + j. Bit 0 of a word is its least significant bit, as on the CPU
// (transpose/cpu.py):
//   streams (N, 3, C), C = ceil(L / 32): bit p of streams[i][k][c] is plane k
//                                        of instance i at position 32 * c + p
//   planes  (G, L, 3):                   bit j of planes[g][pos][k] is plane k
//                                        of instance 32 * g + j at position pos
//   score planes (G, b):                 bit j of planes[g][k] is bit k of the
//                                        value of instance 32 * g + j
// Lanes past N read as 0. Every loop that contains a warp collective runs
// the same number of times on all 32 lanes, so the full mask is exact.

typedef unsigned int word_t;

constexpr int WARP = 32;
constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int PLANES = 3;
constexpr int WARPS_PER_BLOCK = 8;
// Stream words staged per (instance, plane) at a time: 8 words = one 32-byte
// sector, so the warp's global loads use every sector they touch in full.
constexpr int CHUNK = 8;
// Row stride of the staging buffer; odd, so the 32 lanes reading "their" row
// hit 32 different banks.
constexpr int STAGE_ROW = PLANES * CHUNK + 1;

// 32 x 32 bit transpose across a warp by 5 rounds of masked swaps (Hacker's
// Delight 7-3, LSB-first): lane r holds row r on entry and column r on exit,
// i.e. bit c of the entry word of lane r is bit r of the exit word of lane c.
// Round j swaps the bits of lane r (bit j of r clear) in columns with bit j
// set against the bits of lane r + j in columns with bit j clear.
__device__ __forceinline__ word_t warp_transpose(word_t row, int lane)
{
    word_t mask = 0x0000ffffu;  // columns whose bit j is clear
#pragma unroll
    for (int j = 16; j > 0; j >>= 1, mask ^= mask << j) {
        const word_t other = __shfl_xor_sync(FULL_MASK, row, j);
        if (lane & j)
            row = (row & ~mask) | ((other >> j) & mask);
        else
            row = (row & mask) | ((other & mask) << j);
    }
    return row;
}

// Instance streams -> bit planes. Per block of 32 positions, the warp turns
// the 3 stream words of its 32 lanes into the 96 output words
// planes[g][32c .. 32c + 31][0..2], contiguous in memory; lane t stores words
// t, t + 32 and t + 64 of them, so the stores are coalesced.
template <bool kSwap>
__device__ __forceinline__ void streams_to_planes(const word_t* __restrict__ streams,
                                                  word_t* __restrict__ planes, long long n,
                                                  int length, int blocks, long long groups)
{
    __shared__ word_t stage_all[WARPS_PER_BLOCK][WARP * STAGE_ROW];
    __shared__ word_t out_all[WARPS_PER_BLOCK][PLANES * WARP];
    const int warp = threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    word_t* stage = stage_all[warp];
    word_t* out_stage = out_all[warp];

    for (long long g = (long long)blockIdx.x * WARPS_PER_BLOCK + warp; g < groups;
         g += (long long)gridDim.x * WARPS_PER_BLOCK) {
        const long long first = g * WARP;
        word_t* group_planes = planes + g * length * PLANES;
        for (int c0 = 0; c0 < blocks; c0 += CHUNK) {
            const int count = min(CHUNK, blocks - c0);
            // Coalesced load of streams[first .. first + 31][0..2][c0 .. c0 + count - 1]:
            // consecutive lanes read consecutive words of each run of `count`.
            const int per_instance = PLANES * count;
            for (int q = lane; q < WARP * per_instance; q += WARP) {
                const int inst = q / per_instance;
                const int rest = q - inst * per_instance;
                const int k = rest / count;
                const int cc = rest - k * count;
                const long long i = first + inst;
                stage[inst * STAGE_ROW + k * CHUNK + cc] =
                    i < n ? streams[(i * PLANES + k) * blocks + c0 + cc] : 0u;
            }
            __syncwarp();
            for (int cc = 0; cc < count; ++cc) {
                const int c = c0 + cc;
                word_t w[PLANES];
#pragma unroll
                for (int k = 0; k < PLANES; ++k)
                    w[k] = stage[lane * STAGE_ROW + k * CHUNK + cc];
                word_t out[PLANES];  // output words lane, lane + 32, lane + 64
                if constexpr (kSwap) {
                    // Lane p ends up with plane k at position 32c + p: output word 3p + k.
#pragma unroll
                    for (int k = 0; k < PLANES; ++k)
                        out_stage[PLANES * lane + k] = warp_transpose(w[k], lane);
                    __syncwarp();
#pragma unroll
                    for (int s = 0; s < PLANES; ++s)
                        out[s] = out_stage[lane + s * WARP];
                    __syncwarp();
                } else {
                    // Ballot over the lanes of bit p of plane k is the plane word
                    // at position 32c + p; output word q = 3p + k goes to lane q % 32.
#pragma unroll
                    for (int s = 0; s < PLANES; ++s)
                        out[s] = 0;
#pragma unroll
                    for (int p = 0; p < WARP; ++p) {
#pragma unroll
                        for (int k = 0; k < PLANES; ++k) {
                            const word_t word = __ballot_sync(FULL_MASK, (w[k] >> p) & 1u);
                            const int q = PLANES * p + k;
                            if (lane == q % WARP)
                                out[q / WARP] = word;
                        }
                    }
                }
                const int words = PLANES * min(WARP, length - c * WARP);
                word_t* block_planes = group_planes + (long long)c * WARP * PLANES;
#pragma unroll
                for (int s = 0; s < PLANES; ++s) {
                    const int q = lane + s * WARP;
                    if (q < words)
                        block_planes[q] = out[s];
                }
            }
            __syncwarp();  // the stage is rewritten by the next chunk
        }
    }
}

// Score planes (G, bits) -> values (n,), bits <= 31. Lane k loads plane k
// (coalesced); lane r ends with the value of instance 32g + r.
template <bool kSwap>
__device__ __forceinline__ void planes_to_values(const word_t* __restrict__ planes,
                                                 int* __restrict__ values, long long n, int bits,
                                                 long long groups)
{
    const int warp = threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    for (long long g = (long long)blockIdx.x * WARPS_PER_BLOCK + warp; g < groups;
         g += (long long)gridDim.x * WARPS_PER_BLOCK) {
        const word_t row = lane < bits ? planes[g * bits + lane] : 0u;
        word_t value = 0;
        if constexpr (kSwap) {
            value = warp_transpose(row, lane);
        } else {
            // Ballot of bit r over lanes k = bit k of the value of instance r.
#pragma unroll
            for (int r = 0; r < WARP; ++r) {
                const word_t word = __ballot_sync(FULL_MASK, (row >> r) & 1u);
                if (lane == r)
                    value = word;
            }
        }
        const long long i = g * WARP + lane;
        if (i < n)
            values[i] = (int)value;
    }
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP)
planes_ballot_kernel(const word_t* __restrict__ streams, word_t* __restrict__ planes, long long n,
                     int length, int blocks, long long groups)
{
    streams_to_planes<false>(streams, planes, n, length, blocks, groups);
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP)
planes_swap_kernel(const word_t* __restrict__ streams, word_t* __restrict__ planes, long long n,
                   int length, int blocks, long long groups)
{
    streams_to_planes<true>(streams, planes, n, length, blocks, groups);
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP)
unpack_ballot_kernel(const word_t* __restrict__ planes, int* __restrict__ values, long long n,
                     int bits, long long groups)
{
    planes_to_values<false>(planes, values, n, bits, groups);
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP)
unpack_swap_kernel(const word_t* __restrict__ planes, int* __restrict__ values, long long n,
                   int bits, long long groups)
{
    planes_to_values<true>(planes, values, n, bits, groups);
}
