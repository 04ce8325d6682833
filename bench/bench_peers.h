/* bench_peers.h: other libraries' fp32 products, for bench_products to set
 * beside the kernels of pipetrain's seam. Each is loaded at run time where
 * its Debian package is installed (`apt-get install libblis-dev
 * libdnnl-dev libxsmm-dev`) and left out otherwise; nothing in pipetrain
 * needs them.
 *   blis    BLIS's typed API (bli_sgemm, libblis.so.4: Debian's OpenMP
 *           build), strides given as they are stored;
 *   onednn  oneDNN's row-major dnnl_sgemm (libdnnl.so.2, OpenMP);
 *   libxsmm libxsmm's JIT kernels (smmdispatch), for products without a
 *           transposed operand: Debian ships it only as a static library,
 *           so bench/CMakeLists.txt links it where it finds it and defines
 *           BENCH_HAVE_LIBXSMM.
 * Every product is C (M,N) = op(A) op(B) + beta C on row-major floats. */
#ifndef BENCH_PEERS_H
#define BENCH_PEERS_H

#include <dlfcn.h>
#include <stdint.h>

#ifdef BENCH_HAVE_LIBXSMM
#include <libxsmm.h>
#endif

typedef struct {
    const char *name;
    /* 0, or -1 where this library does not take the product */
    int (*sgemm)(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                 int ldb, float beta, float *C, int ldc);
    void (*set_threads)(int n);
} bench_peer;

/* BLIS's typed API: dim_t and inc_t are 64-bit in Debian's build, and
 * trans_t is BLIS_NO_TRANSPOSE 0, BLIS_TRANSPOSE 8 (blis.h) */
static void (*blis_gemm)(int, int, int64_t, int64_t, int64_t, float *, float *, int64_t, int64_t,
                         float *, int64_t, int64_t, float *, float *, int64_t, int64_t);
static void (*blis_threads)(int64_t);

static int peer_blis(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                     int ldb, float beta, float *C, int ldc)
{
    float one = 1.0f;
    blis_gemm(ta ? 8 : 0, tb ? 8 : 0, M, N, K, &one, (float *)A, lda, 1, (float *)B, ldb, 1, &beta,
              C, ldc, 1);
    return 0;
}

static void peer_blis_threads(int n) { blis_threads(n); }

static int (*dnnl_gemm)(char, char, int64_t, int64_t, int64_t, float, const float *, int64_t,
                        const float *, int64_t, float, float *, int64_t);
static void (*omp_threads)(int);

static int peer_onednn(int ta, int tb, int M, int N, int K, const float *A, int lda, const float *B,
                       int ldb, float beta, float *C, int ldc)
{
    return dnnl_gemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc)
               ? -1
               : 0;
}

static void peer_onednn_threads(int n) { omp_threads(n); }

#ifdef BENCH_HAVE_LIBXSMM
/* row-major C = A B is column-major C^T = B^T A^T: the kernel of (N, M, K)
 * with B first */
static int peer_libxsmm(int ta, int tb, int M, int N, int K, const float *A, int lda,
                        const float *B, int ldb, float beta, float *C, int ldc)
{
    if (ta || tb || (beta != 0.0f && beta != 1.0f))
        return -1;
    libxsmm_blasint m = N, n = M, k = K, la = ldb, lb = lda, lc = ldc;
    float alpha = 1.0f;
    int flags = beta == 0.0f ? LIBXSMM_GEMM_FLAG_BETA_0 : LIBXSMM_FLAGS;
    libxsmm_smmfunction f =
        libxsmm_smmdispatch(m, n, k, &la, &lb, &lc, &alpha, &beta, &flags, NULL);
    if (!f)
        return -1;
    f(B, A, C);
    return 0;
}

static void peer_libxsmm_threads(int n) { (void)n; /* one kernel call runs on its caller */ }
#endif

/* the peers this machine has, into out[] (at most 3); returns how many */
static int bench_peers_load(bench_peer *out)
{
    int n = 0;
    void *blis = dlopen("libblis.so.4", RTLD_NOW | RTLD_LOCAL);
    if (blis && (*(void **)&blis_gemm = dlsym(blis, "bli_sgemm")) &&
        (*(void **)&blis_threads = dlsym(blis, "bli_thread_set_num_threads")))
        out[n++] = (bench_peer){"blis", peer_blis, peer_blis_threads};
    void *dnnl = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (dnnl && (*(void **)&dnnl_gemm = dlsym(dnnl, "dnnl_sgemm")) &&
        (*(void **)&omp_threads = dlsym(dnnl, "omp_set_num_threads")))
        out[n++] = (bench_peer){"onednn", peer_onednn, peer_onednn_threads};
#ifdef BENCH_HAVE_LIBXSMM
    libxsmm_init();
    out[n++] = (bench_peer){"libxsmm", peer_libxsmm, peer_libxsmm_threads};
#endif
    return n;
}

#endif
