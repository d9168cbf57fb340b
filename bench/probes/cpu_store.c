/* What a 512-bit store costs beside vpternlogq on this CPU (x86-64 with
 * AVX-512F; docs/cpu.md cites it).
 *
 *   gcc -O2 bench/probes/cpu_store.c -o /tmp/cpu_store && /tmp/cpu_store
 *
 * Cycles per iteration of loops of independent vpternlogq, zmm stores, loads
 * and register moves, in every mix docs/cpu.md compares. The clock comes from
 * a chain of dependent adds of a register (one cycle each), so the cycles are
 * the core's, whatever its frequency (adds of an immediate would not do:
 * Golden Cove folds them at rename, two a cycle). */
#include <stdio.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#define TL(r) "vpternlogq $0x96, %%zmm30, %%zmm31, %%zmm" #r "\n"
#define EIGHT_TL TL(0) TL(1) TL(2) TL(3) TL(4) TL(5) TL(6) TL(7)
#define ST(r, at) "vmovdqa64 %%zmm" #r ", " #at "(%0)\n"
#define LD(at, r) "vmovdqa64 " #at "(%0), %%zmm" #r "\n"
#define MV(a, r) "vmovdqa64 %%zmm" #a ", %%zmm" #r "\n"
#define CLOBBER "memory", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", \
    "xmm10", "xmm11"

static char buffer[4096] __attribute__((aligned(64)));
static const long ROUNDS = 50000000;

#define RUN(name, body)                                                                   \
    do {                                                                                  \
        double t0 = now();                                                                \
        for (long i = 0; i < ROUNDS; ++i)                                                 \
            __asm__ volatile(body ::"r"(buffer) : CLOBBER);                               \
        printf("%-30s %5.2f cycles per iteration\n", name, (now() - t0) * hz / ROUNDS);   \
    } while (0)

int main(void)
{
    long x = 0;
    double t0 = now();
    for (long i = 0; i < 4 * ROUNDS; ++i)
        __asm__ volatile("add %1, %0\n add %1, %0\n add %1, %0\n add %1, %0\n" : "+r"(x) : "r"(i));
    const double hz = 16.0 * ROUNDS / (now() - t0);
    printf("clock %.2f GHz (dependent adds)\n", hz / 1e9);
    RUN("8 vpternlogq", EIGHT_TL);
    RUN("4 zmm stores", ST(8, 0) ST(9, 64) ST(8, 128) ST(9, 192));
    RUN("8 vpternlogq + 2 stores", EIGHT_TL ST(8, 0) ST(9, 64));
    RUN("8 vpternlogq + 4 stores", EIGHT_TL ST(8, 0) ST(9, 64) ST(8, 128) ST(9, 192));
    RUN("8 vpternlogq + 4 loads", EIGHT_TL LD(256, 8) LD(320, 9) LD(384, 10) LD(448, 11));
    RUN("8 vpternlogq + 4 moves", EIGHT_TL MV(20, 8) MV(21, 9) MV(22, 10) MV(23, 11));
    return 0;
}
