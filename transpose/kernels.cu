// Bit transposes on the GPU, W = 32 (compiled by transpose/gpu.py with NVRTC).
//
// One warp handles one word group g of 32 instances at a time (grid stride);
// lane j is instance 32 * g + j. Bit 0 of a word is its least significant
// bit, as on the CPU (transpose/cpu.py):
//   streams (N, 3, C), C = ceil(L / 32): bit p of streams[i][k][c] is plane k
//                                        of instance i at position 32 * c + p
//   planes  (G, L, 3):                   bit j of planes[g][pos][k] is plane k
//                                        of instance 32 * g + j at position pos
//   score planes (G, b):                 bit j of planes[g][k] is bit k of the
//                                        value of instance 32 * g + j
// Lanes past N read as 0. Every loop that contains a warp collective runs
// the same number of times on all 32 lanes, so the full mask is exact.
//
// Streams -> planes moves bytes at the copy engine's pace only if the warp
// keeps many bytes in flight with few instructions per word, so a warp works
// on a chunk of up to CHUNK stream words per (instance, plane):
//   1. load: a group's streams are one contiguous run of 96 C words; when the
//      chunk is the whole run (C <= CHUNK, reads up to 32 CHUNK bases) it is
//      copied with 16-byte asynchronous copies (cp.async) into shared memory,
//      one group ahead of the transposes (double buffered), else word by word;
//   2. transpose every 32 x 32 bit block (per position block c and plane k)
//      by the swap network (5 shuffle rounds of 3 instructions) or by 32
//      ballots, into a shared-memory image of the output run;
//   3. store: the chunk's output is one contiguous run of planes[g]; it is
//      written with 16-byte stores (the image sits at the run's offset mod 4
//      words, so that shared and global addresses are 16-byte aligned alike),
//      a scalar head and tail around them.

typedef unsigned int word_t;

constexpr int WARP = 32;
constexpr unsigned FULL_MASK = 0xffffffffu;
constexpr int PLANES = 3;
constexpr int WARPS_PER_BLOCK = 4;
// Stream words per (instance, plane) in one chunk: reads up to 32 * CHUNK = 256
// bases take the 16-byte load path (L = 150: C = 5).
constexpr int CHUNK = 8;
constexpr int STAGE_WORDS = WARP * PLANES * CHUNK;   // one chunk of streams
constexpr int OUT_WORDS = WARP * PLANES * CHUNK + 4; // one chunk of planes, + alignment slack
// How a ballot word reaches the lane that stores it (see keep_if_mine):
// 0: word * flag + slot, one IMAD (FMA pipe); 1: lane 0 writes it to the
// shared image (one STS per word); 2: a select, slot = mine ? word : slot.
// 3: lane 0 writes four words at a time to a shared row, every lane reads its own.
// Measured on an H100 (bench/results/transpose_variants_h100.csv): 0 is the
// fastest for streams -> planes, 3 for the unpack (UNPACK_BALLOT_DELIVERY).
// Tried and removed (tenth session): all 32 lanes writing the (identical)
// ballot words four at a time into the shared image in output order, with no
// per-lane delivery at all: 1.5 instructions per word instead of 2.5, but
// 0.56 of the copy at 16M instances against 0.69 (issue 0.51 a scheduler
// cycle against 0.79: the stores of one address by every lane stall).
constexpr int BALLOT_DELIVERY = 0;
// With delivery 0 or 2 the ballot kernel's lanes hold a block's output words
// as three coalesced rows of 32: 1 stores them straight to global memory, 0
// through the shared image and 16-byte stores like the swap kernel. Without
// the image a warp needs a third less shared memory, so that 6 blocks fit an
// SM (MIN_BLOCKS_PER_SM). Direct stores, 6 blocks and CC_UNROLL 4 together:
// 0.73-0.75 of the copy at 16M instances in three runs on an H100, against
// 0.67-0.69 through the image with neither (the swap kernel unchanged,
// bench/results/transpose_variants_h100.csv).
constexpr int BALLOT_DIRECT_STORE = 1;
constexpr int UNPACK_BALLOT_DELIVERY = 3;
// Position blocks transposed per pass of the block loop (unrolled): 4 keeps
// more of the ballot kernel's votes and stores in flight than 1 or 2 (and 8).
constexpr int CC_UNROLL = 4;
// Minimum resident blocks per multiprocessor asked of the compiler
// (__launch_bounds__): 0 leaves it to the compiler (80 and 96 registers);
// 6 holds the forward kernels to 80.
constexpr int MIN_BLOCKS_PER_SM = 6;

// Lane constants of the swap network: round j = 16, 8, 4, 2, 1 exchanges
// with lane ^ j; a lane keeps the columns on its side of bit j and takes the
// partner's other columns rotated by j (the bits that wrap around fall on
// columns it keeps, so a rotation serves as the shift).
struct SwapLanes {
    word_t keep[5];
    unsigned rotate[5];
    __device__ __forceinline__ explicit SwapLanes(int lane)
    {
        word_t mask = 0x0000ffffu;  // columns whose bit j is clear
#pragma unroll
        for (int r = 0, j = 16; r < 5; ++r, j >>= 1, mask ^= mask << j) {
            const bool high = lane & j;
            keep[r] = high ? ~mask : mask;
            rotate[r] = high ? 32u - j : (unsigned)j;
        }
    }
};

// 32 x 32 bit transpose across a warp (Hacker's Delight 7-3, LSB-first): lane
// r holds row r on entry and column r on exit, i.e. bit c of the entry word
// of lane r is bit r of the exit word of lane c.
__device__ __forceinline__ word_t warp_transpose(word_t row, const SwapLanes& s)
{
#pragma unroll
    for (int r = 0, j = 16; r < 5; ++r, j >>= 1) {
        const word_t other = __shfl_xor_sync(FULL_MASK, row, j);
        const word_t moved = __funnelshift_l(other, other, s.rotate[r]);
        // row = (row & keep) | (moved & ~keep) as one LOP3 (the compiler splits it into
        // three when it sees that keep is a constant mask or its complement)
        asm("lop3.b32 %0, %1, %2, %3, 0xE4;" : "=r"(row) : "r"(row), "r"(moved), "r"(s.keep[r]));
    }
    return row;
}

// __ballot_sync(FULL_MASK, (x >> bit) & 1) as a bit test into a predicate
// (one LOP3) and the vote; written out because the compiler otherwise shifts,
// masks and compares (three instructions) before every vote.
__device__ __forceinline__ word_t ballot_bit(word_t x, int bit)
{
    word_t word;
    asm volatile("{\n\t.reg .pred p;\n\t.reg .b32 t;\n\t"
                 "and.b32 t, %1, %2;\n\tsetp.ne.b32 p, t, 0;\n\t"
                 "vote.sync.ballot.b32 %0, p, 0xffffffff;\n\t}"
                 : "=r"(word) : "r"(x), "r"(1u << bit));
    return word;
}

// Ballot delivery: every lane receives each ballot word and the lane it
// belongs to keeps it. As `keep ? word : old` this costs a select on the
// integer pipe beside the bit test and the vote; as word * flag + old (flag
// = 1 in the keeping lane, 0 elsewhere) it is one IMAD on the FMA pipe. The
// flags go through an opaque move so that the compiler, which would see that
// they are 0 or 1, cannot turn the multiply back into a select.
template <int N>
__device__ __forceinline__ void lane_flags(word_t (&lane_is)[N], int lane)
{
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm("mov.b32 %0, %1;" : "=r"(lane_is[i]) : "r"(lane == i ? 1u : 0u));
}

__device__ __forceinline__ word_t keep_if_mine(word_t word, word_t flag, word_t old)
{
    return word * flag + old;  // old is 0 in the keeping lane: each slot is kept once
}

// Copy words [0, n) of a shared image placed at offset `lead` (= base mod 4)
// to global words [base, base + n): 16-byte stores for the aligned middle.
__device__ __forceinline__ void store_run(word_t* __restrict__ global, long long base, const word_t* image,
                                          int lead, int n, int lane)
{
    const int head = min((4 - lead) & 3, n);
    if (lane < head)
        global[base + lane] = image[lead + lane];
    const int vectors = (n - head) >> 2;
    uint4* global4 = reinterpret_cast<uint4*>(global + base + head);
    const uint4* image4 = reinterpret_cast<const uint4*>(image + lead + head);
    for (int v = lane; v < vectors; v += WARP)
        global4[v] = image4[v];
    const int done = head + 4 * vectors;
    if (lane < n - done)
        global[base + done + lane] = image[lead + done + lane];
}

// Instance streams -> bit planes.
// 16-byte global -> shared copies that complete in the background (cp.async,
// sm_80+): a warp fetches its next group while it transposes the current one.
__device__ __forceinline__ void copy16_async(word_t* shared, const word_t* global)
{
    const unsigned address = (unsigned)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(address), "l"(global) : "memory");
}

template <int kPending>
__device__ __forceinline__ void async_wait()  // until at most kPending fetches are in flight
{
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Start fetching group g's streams (one contiguous run of 96 C words, 16-byte
// aligned) into stage; instances past n read as 0.
__device__ __forceinline__ void fetch_group(word_t* stage, const word_t* __restrict__ streams, long long g,
                                            long long n, int blocks, int lane)
{
    const long long first = g * WARP;
    const word_t* group_streams = streams + first * PLANES * blocks;
    const int words = (int)min((long long)WARP, n - first) * PLANES * blocks;
    const int vectors = words >> 2;
#pragma unroll 1
    for (int v = lane; v < vectors; v += WARP)
        copy16_async(stage + 4 * v, group_streams + 4 * v);
    for (int q = 4 * vectors + lane; q < WARP * PLANES * blocks; q += WARP)
        stage[q] = q < words ? group_streams[q] : 0u;
    asm volatile("cp.async.commit_group;\n" ::: "memory");
}

template <bool kSwap>
__device__ __forceinline__ void streams_to_planes(const word_t* __restrict__ streams,
                                                  word_t* __restrict__ planes, long long n,
                                                  int length, int blocks, long long groups)
{
    __shared__ __align__(16) word_t stage_all[WARPS_PER_BLOCK][2][STAGE_WORDS];  // two: fetch ahead
    constexpr bool kDirect = !kSwap && BALLOT_DIRECT_STORE && (BALLOT_DELIVERY == 0 || BALLOT_DELIVERY == 2);
    __shared__ __align__(16) word_t out_all[WARPS_PER_BLOCK][kDirect ? 4 : OUT_WORDS];
    __shared__ __align__(16) word_t row_all[WARPS_PER_BLOCK][!kSwap && BALLOT_DELIVERY == 3 ? PLANES * WARP : 4];
    word_t* row = row_all[threadIdx.x / WARP];
    const int warp = threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    word_t* out = out_all[warp];
    const SwapLanes swap_lanes(lane);
    word_t lane_is[kSwap || BALLOT_DELIVERY != 0 ? 1 : WARP];  // ballot: lane_is[i] = (lane == i), 0 or 1
    if constexpr (!kSwap && BALLOT_DELIVERY == 0)
        lane_flags(lane_is, lane);

    // Reads up to 32 CHUNK bases: a group is one chunk, fetched asynchronously one
    // group ahead (stage buffer `buffer` holds group g, the other one g + stride).
    const bool whole = blocks <= CHUNK;
    const long long stride = (long long)gridDim.x * WARPS_PER_BLOCK;
    long long g = (long long)blockIdx.x * WARPS_PER_BLOCK + warp;
    if (whole && g < groups)
        fetch_group(stage_all[warp][0], streams, g, n, blocks, lane);
    for (int buffer = 0; g < groups; g += stride, buffer ^= 1) {
        const long long first = g * WARP;
        const word_t* group_streams = streams + first * PLANES * blocks;
        const int present = (int)min((long long)WARP, n - first);  // instances of this group
        word_t* stage = stage_all[warp][whole ? buffer : 0];
        for (int c0 = 0; c0 < blocks; c0 += CHUNK) {
            const int count = min(CHUNK, blocks - c0);
            const int per_instance = PLANES * count;  // stage[inst * per_instance + k * count + cc]
            __syncwarp();  // the previous chunk's stage and image are consumed
            if (whole) {
                if (g + stride < groups) {
                    fetch_group(stage_all[warp][buffer ^ 1], streams, g + stride, n, blocks, lane);
                    async_wait<1>();  // this group's fetch is done, the next one's may run on
                } else {
                    async_wait<0>();
                }
            } else {
                for (int q = lane; q < WARP * per_instance; q += WARP) {
                    const int inst = q / per_instance;
                    const int rest = q - inst * per_instance;
                    const int k = rest / count;
                    const int cc = rest - k * count;
                    stage[q] = inst < present ? group_streams[(inst * PLANES + k) * blocks + c0 + cc] : 0u;
                }
            }
            __syncwarp();
            const long long base = (g * length + (long long)c0 * WARP) * PLANES;  // first output word
            const int lead = (int)(base & 3);
#pragma unroll CC_UNROLL
            for (int cc = 0; cc < count; ++cc) {
                word_t w[PLANES];
#pragma unroll
                for (int k = 0; k < PLANES; ++k)
                    w[k] = stage[lane * per_instance + k * count + cc];
                word_t* block_out = out + lead + cc * WARP * PLANES;  // positions 32 (c0 + cc) + p
                if constexpr (kSwap) {
                    // Lane p ends up with plane k at position 32 (c0 + cc) + p.
#pragma unroll
                    for (int k = 0; k < PLANES; ++k)
                        block_out[PLANES * lane + k] = warp_transpose(w[k], swap_lanes);
                } else {
                    // The ballot over the lanes of bit p of plane k is the plane word
                    // of position 32 (c0 + cc) + p, output word q = 3p + k of the
                    // block: lane q % 32 keeps it, in its slot q / 32.
                    // (plane outer, bit inner: 32 tests of one word in a row, which
                    // the compiler turns into a few R2P that set 7 predicates each)
                    if constexpr (BALLOT_DELIVERY == 3) {
                        // Every lane holds every ballot word; lane 0 writes them four at
                        // a time (16-byte stores) to a plane-major row, then lane p
                        // takes position p's three words from it.
#pragma unroll
                        for (int k = 0; k < PLANES; ++k) {
#pragma unroll
                            for (int p = 0; p < WARP; p += 4) {
                                const uint4 four = make_uint4(ballot_bit(w[k], p), ballot_bit(w[k], p + 1),
                                                              ballot_bit(w[k], p + 2), ballot_bit(w[k], p + 3));
                                if (lane == 0)
                                    *reinterpret_cast<uint4*>(row + k * WARP + p) = four;
                            }
                        }
                        __syncwarp();
#pragma unroll
                        for (int k = 0; k < PLANES; ++k)
                            block_out[PLANES * lane + k] = row[k * WARP + lane];
                        __syncwarp();  // the row is rewritten by the next block
                    } else {
                        word_t slot[PLANES] = {0u, 0u, 0u};
#pragma unroll
                        for (int k = 0; k < PLANES; ++k) {
#pragma unroll
                            for (int p = 0; p < WARP; ++p) {
                                const int q = PLANES * p + k;
                                const word_t word = ballot_bit(w[k], p);
                                if constexpr (BALLOT_DELIVERY == 0)
                                    slot[q / WARP] = keep_if_mine(word, lane_is[q % WARP], slot[q / WARP]);
                                else if constexpr (BALLOT_DELIVERY == 1) {
                                    if (lane == 0)
                                        block_out[q] = word;
                                } else
                                    slot[q / WARP] = lane == q % WARP ? word : slot[q / WARP];
                            }
                        }
                        if constexpr (kDirect) {
                            // output word q = 32 s + lane of the block; the chunk's last
                            // block may hold fewer than 32 positions
                            const int block_words = PLANES * min(WARP, length - (c0 + cc) * WARP);
                            word_t* global_out = planes + base + (long long)cc * WARP * PLANES;
#pragma unroll
                            for (int s = 0; s < PLANES; ++s)
                                if (s * WARP + lane < block_words)
                                    global_out[s * WARP + lane] = slot[s];
                        } else if constexpr (BALLOT_DELIVERY != 1) {
#pragma unroll
                            for (int s = 0; s < PLANES; ++s)
                                block_out[s * WARP + lane] = slot[s];
                        }
                    }
                }
            }
            if constexpr (!kDirect) {
                __syncwarp();
                const int words = PLANES * min(WARP * count, length - c0 * WARP);
                store_run(planes, base, out, lead, words, lane);
            }
        }
    }
}

// Score planes (G, bits) -> values (n,), bits <= 31. With bits <= 16 a warp
// takes two groups at once: lanes 0..15 load the planes of group 2h, lanes
// 16..31 those of group 2h + 1 (one contiguous 128-byte load when bits = 16);
// after the transpose lane r holds the value of instance r of the first group
// in its low half and of the second in its high half. A warp loads INFLIGHT
// such units before it transposes any, so that enough bytes are in flight.
constexpr int INFLIGHT = 8;

template <bool kSwap>
__device__ __forceinline__ void planes_to_values(const word_t* __restrict__ planes,
                                                 int* __restrict__ values, long long n, int bits,
                                                 long long groups)
{
    const int warp = threadIdx.x / WARP;
    const int lane = threadIdx.x % WARP;
    const SwapLanes swap_lanes(lane);
    word_t lane_is[kSwap || UNPACK_BALLOT_DELIVERY != 0 ? 1 : WARP];
    if constexpr (!kSwap && UNPACK_BALLOT_DELIVERY == 0)
        lane_flags(lane_is, lane);
    __shared__ __align__(16) word_t words_all[WARPS_PER_BLOCK][kSwap ? 4 : WARP];
    word_t* words = words_all[warp];
    const bool two = bits <= 16;
    const int per_unit = two ? 2 : 1;             // groups per warp unit
    const int half = two ? lane >> 4 : 0;        // which group of the unit this lane loads
    const int plane = two ? lane & 15 : lane;    // which of its planes
    const long long units = (groups + per_unit - 1) / per_unit;
    const long long stride = (long long)gridDim.x * WARPS_PER_BLOCK;
    for (long long h0 = (long long)blockIdx.x * WARPS_PER_BLOCK + warp; h0 < units; h0 += stride * INFLIGHT) {
        word_t row[INFLIGHT];
#pragma unroll
        for (int u = 0; u < INFLIGHT; ++u) {
            const long long g = (h0 + u * stride) * per_unit + half;
            row[u] = (plane < bits && g < groups) ? planes[g * bits + plane] : 0u;
        }
#pragma unroll
        for (int u = 0; u < INFLIGHT; ++u) {
            const long long h = h0 + u * stride;
            word_t value = 0;
            if constexpr (kSwap) {
                value = warp_transpose(row[u], swap_lanes);
            } else if constexpr (UNPACK_BALLOT_DELIVERY == 3) {
                // Ballot of bit r over the lanes = the bits of instance r's value(s),
                // through the shared row (lane 0, four words a store).
#pragma unroll
                for (int r = 0; r < WARP; r += 4) {
                    const uint4 four = make_uint4(ballot_bit(row[u], r), ballot_bit(row[u], r + 1),
                                                  ballot_bit(row[u], r + 2), ballot_bit(row[u], r + 3));
                    if (lane == 0)
                        *reinterpret_cast<uint4*>(words + r) = four;
                }
                __syncwarp();
                value = words[lane];
                __syncwarp();
            } else {
#pragma unroll
                for (int r = 0; r < WARP; ++r)
                    value = keep_if_mine(ballot_bit(row[u], r), lane_is[r], value);
            }
            const long long first = h * per_unit * WARP;
            if (two) {
                const long long i = first + lane, k = first + WARP + lane;
                if (i < n) values[i] = (int)(value & 0xffffu);
                if (k < n) values[k] = (int)(value >> 16);
            } else {
                const long long i = first + lane;
                if (i < n) values[i] = (int)value;
            }
        }
    }
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP, MIN_BLOCKS_PER_SM)
planes_ballot_kernel(const word_t* __restrict__ streams, word_t* __restrict__ planes, long long n,
                     int length, int blocks, long long groups)
{
    streams_to_planes<false>(streams, planes, n, length, blocks, groups);
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP, MIN_BLOCKS_PER_SM)
planes_swap_kernel(const word_t* __restrict__ streams, word_t* __restrict__ planes, long long n,
                   int length, int blocks, long long groups)
{
    streams_to_planes<true>(streams, planes, n, length, blocks, groups);
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP, MIN_BLOCKS_PER_SM)
unpack_ballot_kernel(const word_t* __restrict__ planes, int* __restrict__ values, long long n,
                     int bits, long long groups)
{
    planes_to_values<false>(planes, values, n, bits, groups);
}

extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP, MIN_BLOCKS_PER_SM)
unpack_swap_kernel(const word_t* __restrict__ planes, int* __restrict__ values, long long n,
                   int bits, long long groups)
{
    planes_to_values<true>(planes, values, n, bits, groups);
}

// Sequence bytes -> bit planes, the encoding fused with the transpose: the
// reads' bytes travel to the device as they were read (spans in a FASTQ
// buffer), so the host neither encodes nor packs them. Lane j of the warp on
// group g reads instance 32 g + j (starts[i], lengths[i]: its span in `data`)
// and assembles, per block c of 32 positions, the three row words of
// `streams` (code_of[byte]: 0-3 a base, 4 a base that matches nothing,
// 255 a byte outside the alphabet; positions past the read are invalid); the
// swap network turns them into the block's plane words. A byte coded 255
// sets *bad: the host then encodes the chunk itself for the error message.
extern "C" __global__ void __launch_bounds__(WARPS_PER_BLOCK * WARP, MIN_BLOCKS_PER_SM)
pack_bytes_kernel(const unsigned char* __restrict__ data, const long long* __restrict__ starts,
                         const int* __restrict__ lengths, const unsigned char* __restrict__ table,
                         word_t* __restrict__ planes, int* __restrict__ bad, long long n, int length,
                         long long groups)
{
    __shared__ unsigned char code_of[256];
    for (int b = threadIdx.x; b < 256; b += blockDim.x)
        code_of[b] = table[b];
    __syncthreads();
    const int lane = threadIdx.x % WARP;
    const SwapLanes swap(lane);
    const long long warps = (long long)gridDim.x * WARPS_PER_BLOCK;
    bool seen_bad = false;
    for (long long g = blockIdx.x * (long long)WARPS_PER_BLOCK + threadIdx.x / WARP; g < groups; g += warps) {
        const long long i = g * WARP + lane;
        const unsigned char* read = data + (i < n ? starts[i] : 0);
        const int read_length = i < n ? lengths[i] : 0;
        word_t* out = planes + g * (long long)length * PLANES;
        for (int first = 0; first < length; first += WARP) {  // the same count on every lane
            word_t low = 0, high = 0, valid = 0;
            const int stop = min(WARP, read_length - first);
            for (int p = 0; p < stop; ++p) {
                const unsigned code = code_of[read[first + p]];
                seen_bad |= code == 255;
                const word_t ok = code < 4;
                low |= (code & ok) << p;
                high |= ((code >> 1) & ok) << p;
                valid |= ok << p;
            }
            low = warp_transpose(low, swap);
            high = warp_transpose(high, swap);
            valid = warp_transpose(valid, swap);
            if (first + lane < length) {
                word_t* at = out + (long long)(first + lane) * PLANES;
                at[0] = low;
                at[1] = high;
                at[2] = valid;
            }
        }
    }
    if (__any_sync(FULL_MASK, seen_bad) && lane == 0)
        atomicExch(bad, 1);
}
