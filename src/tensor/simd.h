/* simd.h: which vector width the memory-bound kernels run at, chosen once
 * from what the CPU reports (never from the build machine or the
 * environment), and the function attributes that compile one function for
 * a wider unit than the rest of the file.
 *
 * A kernel with vector paths (AdamW, the fused LayerNorm, the activations)
 * keeps a portable loop beside them and, where the paths must agree on every
 * bit, does exactly the same float operations in the same order in each
 * (no fused multiply-add: the build turns contraction off). Callers: the
 * kernels of src/tensor and the optimizer. */
#ifndef PT_TENSOR_SIMD_H
#define PT_TENSOR_SIMD_H

typedef enum { PT_SIMD_PORTABLE = 0, PT_SIMD_AVX2 = 1, PT_SIMD_AVX512 = 2 } pt_simd_level;

/* The widest level this CPU runs (AVX-512 needs F, BW, VL and DQ; AVX2
 * needs FMA too), asked of the CPU once. */
pt_simd_level pt_simd_level_of_cpu(void);
/* Caps the level pt_simd_level_of_cpu() reports at `most` from now on (a
 * test runs each path on one machine this way; PT_SIMD_AVX512 lifts the
 * cap). Not thread-safe against running kernels. */
void pt_simd_limit(pt_simd_level most);
/* "avx512", "avx2" or "portable" */
const char *pt_simd_name(pt_simd_level level);

#if defined(__x86_64__) && defined(__GNUC__)
#define PT_SIMD_X86      1
#define PT_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define PT_TARGET_AVX2   __attribute__((target("avx2,fma")))
#else
#define PT_SIMD_X86 0
#endif

#endif
