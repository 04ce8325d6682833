/* simd.c: the CPU's vector level (simd.h), asked once. */
#include "tensor/simd.h"

static pt_simd_level ask_cpu(void)
{
#if PT_SIMD_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return PT_SIMD_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return PT_SIMD_AVX2;
#endif
    return PT_SIMD_PORTABLE;
}

static int cap = PT_SIMD_AVX512;

void pt_simd_limit(pt_simd_level most) { __atomic_store_n(&cap, (int)most, __ATOMIC_RELAXED); }

pt_simd_level pt_simd_level_of_cpu(void)
{
    /* racing first callers compute and store the same answer */
    static int level = -1;
    int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (l < 0) {
        l = (int)ask_cpu();
        __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    }
    int most = __atomic_load_n(&cap, __ATOMIC_RELAXED);
    return (pt_simd_level)(l < most ? l : most);
}

const char *pt_simd_name(pt_simd_level level)
{
    return level == PT_SIMD_AVX512 ? "avx512" : level == PT_SIMD_AVX2 ? "avx2" : "portable";
}
