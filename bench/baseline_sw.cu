// Word-wise GPU Smith-Waterman baseline, in the style of the "existing GPU"
// implementation the BPBC paper compares against: one block per instance,
// one thread per pattern row, 32-bit integer cells, anti-diagonal wavefront
// (thread i computes cell (i, d - i) at step d), affine gaps (Gotoh).
// H of the row above travels through double-buffered shared memory.

#define NEG_INF (-(1 << 28))

extern "C" __global__ void sw_wordwise(const unsigned char* __restrict__ reads, const long long length,
                                       const unsigned char* __restrict__ pattern_masks, const int m,
                                       const int match, const int mismatch, const int first_gap,
                                       const int extend, int* __restrict__ out)
{
    extern __shared__ int shared[];  // H[2][m], E[2][m]
    int* h_row = shared;
    int* e_row = shared + 2 * m;
    const int i = threadIdx.x;
    const unsigned char* read = reads + (long long)blockIdx.x * length;
    const unsigned char mask = i < m ? pattern_masks[i] : 0;
    int h_left = 0;        // H[i][j-1]
    int f_left = NEG_INF;  // gap along the read, F[i][j-1]
    int h_diag = 0;        // H[i-1][j-1]
    int best = 0;
    const long long steps = length + m - 1;
    for (long long d = 0; d < steps; ++d) {
        const long long j = d - i;
        const int cur = (int)(d & 1);
        const int prev = cur ^ 1;
        if (i < m && j >= 0 && j < length) {
            int h_up = 0, e_up = NEG_INF;
            if (i > 0) {  // written by thread i - 1 at step d - 1
                h_up = h_row[prev * m + i - 1];
                e_up = e_row[prev * m + i - 1];
            }
            const unsigned char code = read[j];
            const int s = (code < 4 && ((mask >> code) & 1)) ? match : -mismatch;
            const int e = max(e_up - extend, h_up - first_gap);
            const int f = max(f_left - extend, h_left - first_gap);
            const int h = max(max(0, h_diag + s), max(e, f));
            best = max(best, h);
            h_row[cur * m + i] = h;
            e_row[cur * m + i] = e;
            h_diag = h_up;
            h_left = h;
            f_left = f;
        }
        __syncthreads();
    }
    if (i < m) atomicMax(out + blockIdx.x, best);
}
