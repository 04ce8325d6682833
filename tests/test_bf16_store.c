/* test_bf16_store: the bf16 passes that round through runs of floats
 * (kernels_body.h's ST_RUN: 32 at a time by AVX512_BF16's VCVTNE2PS2BF16
 * where the CPU has it, whose bits differ from pt_bf16_round's on
 * denormals) store pt_bf16_round's bits, on every bf16 table this CPU runs:
 *   store_floats  floats of every kind: +-0, denormals (a run of 32 all
 *                 of them, and one among normals at each of the 32 places
 *                 of a run), ties to even both ways and the floats beside
 *                 them, the largest float and what rounds past it,
 *                 +-infinity, quiet and signalling NaNs of both signs; at
 *                 lengths around a run (1 to 1000) and offsets off 64
 *                 bytes; then 2^20 random bit patterns;
 *   GELU          forward and backward against the fp32 table's GELU of
 *                 the same (bf16) inputs, rounded once, on inputs from
 *                 denormal to large, both signs. */
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "tensor/bf16.h"
#include "tensor/kernels.h"

static float of_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* store_floats of n floats from in + off, against pt_bf16_round */
static void check_store(const pt_kernels *k, const float *in, size_t n, const char *what)
{
    pt_bf16 out[1100];
    k->store_floats(out, in, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &in[i], sizeof u);
        CHECK(out[i] == pt_bf16_round(in[i]), "%s %s: float %08x of %zu stored %04x, want %04x",
              k->name, what, u, n, out[i], pt_bf16_round(in[i]));
    }
}

static void check_kinds(const pt_kernels *k)
{
    static const uint32_t kinds[] = {
        0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007fffff, 0x807fffff, 0x00400000,
        0x00008000, 0x00018000, 0x00800000, 0x80800000, 0x3f808000, 0x3f818000, 0x3f807fff,
        0x3f808001, 0x3f817fff, 0xbf808000, 0xbf818000, 0x7f7fffff, 0xff7fffff, 0x7f7f8000,
        0x7f7f7fff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0xff800001,
        0x7fbfffff, 0x7fffffff, 0x3f800000, 0x40490fdb};
    enum { KINDS = sizeof kinds / sizeof kinds[0] };
    float in[1100];
    /* every kind at every place of a run, at lengths around a run */
    static const size_t lengths[] = {1, 31, 32, 33, 63, 64, 255, 256, 257, 1000};
    for (size_t l = 0; l < sizeof lengths / sizeof lengths[0]; l++)
        for (size_t off = 0; off < 3; off++) {
            for (size_t i = 0; i < lengths[l]; i++)
                in[off + i] = of_bits(kinds[(i * 7 + l + off) % KINDS]);
            check_store(k, in + off, lengths[l], "kinds");
        }
    /* a run all denormal, then one denormal among normals at each place */
    for (size_t i = 0; i < 64; i++)
        in[i] = of_bits(0x00000001u + (uint32_t)i * 0x1ffffu);
    check_store(k, in, 64, "denormals");
    for (int at = 0; at < 32; at++) {
        for (size_t i = 0; i < 64; i++)
            in[i] = of_bits(0x3f808000u + (uint32_t)i * 0x10000u);
        in[at] = of_bits(0x00018000u);
        in[32 + at] = of_bits(0x80008000u);
        check_store(k, in, 64, "a denormal among normals");
    }
    /* random bit patterns */
    uint32_t x = 2463534242u;
    for (int r = 0; r < (1 << 20) / 1000; r++) {
        for (size_t i = 0; i < 1000; i++) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            in[i] = of_bits(x);
        }
        check_store(k, in, 1000, "random");
    }
}

/* GELU in bf16 against the fp32 table's GELU of the same inputs rounded
 * once: the two compute the same floats (one kernel body), so only the
 * rounding may differ, and must not */
static void check_gelu(const pt_kernels *k, const pt_kernels *f32)
{
    enum { N = 1000 };
    pt_bf16 x[N], dy[N], y[N], dx[N];
    float xf[N], dyf[N], yf[N], dxf[N];
    for (int i = 0; i < N; i++) {
        float v = i < 100 ? of_bits(0x00000100u * (uint32_t)(i + 1)) /* denormal */
                          : (float)(i - 550) / 60.0f;
        x[i] = pt_bf16_round(i % 2 ? -v : v);
        dy[i] = pt_bf16_round(1.0f + (float)(i % 13) / 7.0f);
        xf[i] = pt_bf16_widen(x[i]);
        dyf[i] = pt_bf16_widen(dy[i]);
    }
    k->gelu_forward(y, x, N);
    f32->gelu_forward(yf, xf, N);
    k->gelu_backward(dx, x, dy, N);
    f32->gelu_backward(dxf, xf, dyf, N);
    for (int i = 0; i < N; i++) {
        CHECK(y[i] == pt_bf16_round(yf[i]), "%s GELU(%a) stored %04x, want %04x", k->name, xf[i],
              y[i], pt_bf16_round(yf[i]));
        CHECK(dx[i] == pt_bf16_round(dxf[i]), "%s GELU'(%a) stored %04x, want %04x", k->name, xf[i],
              dx[i], pt_bf16_round(dxf[i]));
    }
}

int main(void)
{
    const pt_kernels *tables[] = {pt_kernels_bf16_portable(), pt_kernels_bf16_amx(),
                                  pt_kernels_bf16_avx512()};
    for (int t = 0; t < 3; t++) {
        if (!tables[t]) {
            printf("  %s: not on this CPU\n", t == 1 ? "amx" : "avx512bf16");
            continue;
        }
        check_kinds(tables[t]);
        check_gelu(tables[t], pt_kernels_cpu());
    }
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
