// A small loop for tests/bench: LOP3, a shuffle, a load, a conditional store and a DPX max.
extern "C" __global__ void small_loop(const unsigned* __restrict__ in, unsigned* __restrict__ out, int n) {
    unsigned x = threadIdx.x, y = 0;
    for (int k = 0; k < n; ++k) {
        const unsigned v = in[k * 32 + threadIdx.x];
        x = (x & v) | (~x & y);
        y = __shfl_up_sync(0xffffffffu, x, 1, 16) ^ (v >> 3);
        x = __vimax3_s16x2_relu(x, y, v);
        if (v == 7u) out[k] = x;
    }
    out[threadIdx.x] = x ^ y;
}
