/* bench_onednn_bf16.h: oneDNN's bf16 matmul primitive, for
 * bench_bf16_products to set beside pipetrain's bf16 products: the kernel
 * PyTorch's autocast runs on these CPUs (brgemm on AMX tiles where the CPU
 * has them). Built where bench/CMakeLists.txt finds oneDNN's headers and
 * library (`apt-get install libdnnl-dev`) and defines BENCH_HAVE_ONEDNN;
 * nothing in pipetrain needs it.
 *
 * bench_onednn_product takes the seam's product (matmul_bf16.h): bf16
 * operands with any strides, C float or bf16, beta 0 or 1 (a sum post-op),
 * a float bias, alpha 1. The operands' layouts are given as they are
 * stored, so oneDNN packs them inside each call as pipetrain's product
 * does where it keeps nothing. The primitive of the last shape is kept, as
 * a framework caches it: a call times the product, not the primitive's
 * creation. One OpenMP thread (oneDNN's Debian build runs on OpenMP). */
#ifndef BENCH_ONEDNN_BF16_H
#define BENCH_ONEDNN_BF16_H

#include "tensor/matmul_bf16.h"

#ifdef BENCH_HAVE_ONEDNN
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>

static struct {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int ready; /* 1: made; -1: oneDNN could not start */
    /* the last shape's primitive and memory objects */
    int ta, tb, M, N, K, c_bf16, bias;
    float beta;
    dnnl_primitive_t prim;
    dnnl_memory_t a, b, c, bias_m;
    const char *impl;
} onednn;

static int onednn_start(void)
{
    if (onednn.ready)
        return onednn.ready > 0;
    onednn.ready = -1;
    void (*threads)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "omp_set_num_threads");
    if (threads)
        threads(1);
    if (dnnl_engine_create(&onednn.engine, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&onednn.stream, onednn.engine, dnnl_stream_default_flags) !=
            dnnl_success)
        return 0;
    onednn.ready = 1;
    return 1;
}

static void onednn_forget(void)
{
    if (!onednn.prim)
        return;
    dnnl_primitive_destroy(onednn.prim);
    dnnl_memory_destroy(onednn.a);
    dnnl_memory_destroy(onednn.b);
    dnnl_memory_destroy(onednn.c);
    dnnl_memory_destroy(onednn.bias_m);
    onednn.prim = NULL;
}

/* a rows x cols matrix of type t whose element (r, c) lies at r * sr + c * sc */
static int onednn_desc(dnnl_memory_desc_t *d, int rows, int cols, dnnl_data_type_t t, long sr,
                       long sc)
{
    dnnl_dims_t dims = {rows, cols}, strides = {sr, sc};
    return dnnl_memory_desc_init_by_strides(d, 2, dims, t, strides) == dnnl_success;
}

/* the primitive for this shape, made when it is not the last one */
static int onednn_prepare(int ta, int tb, int M, int N, int K, pt_mat A, pt_mat B, float beta,
                          pt_mat C, int bias)
{
    int c_bf16 = C.dt == PT_BF16;
    if (onednn.prim && onednn.ta == ta && onednn.tb == tb && onednn.M == M && onednn.N == N &&
        onednn.K == K && onednn.c_bf16 == c_bf16 && onednn.bias == bias && onednn.beta == beta)
        return 1;
    onednn_forget();
    dnnl_memory_desc_t a, b, c, bd;
    long la = A.ld, lb = B.ld;
    if (!onednn_desc(&a, M, K, dnnl_bf16, ta ? 1 : la, ta ? la : 1) ||
        !onednn_desc(&b, K, N, dnnl_bf16, tb ? 1 : lb, tb ? lb : 1) ||
        !onednn_desc(&c, M, N, c_bf16 ? dnnl_bf16 : dnnl_f32, C.ld, 1) ||
        !onednn_desc(&bd, 1, N, dnnl_f32, N, 1))
        return 0;
    dnnl_matmul_desc_t md;
    dnnl_primitive_attr_t attr;
    dnnl_post_ops_t ops = NULL;
    dnnl_primitive_desc_t pd = NULL;
    if (dnnl_matmul_desc_init(&md, &a, &b, bias ? &bd : NULL, &c) != dnnl_success ||
        dnnl_primitive_attr_create(&attr) != dnnl_success)
        return 0;
    int ok = 1;
    if (beta != 0.0f)
        ok = dnnl_post_ops_create(&ops) == dnnl_success &&
             dnnl_post_ops_append_sum(ops, beta) == dnnl_success &&
             dnnl_primitive_attr_set_post_ops(attr, ops) == dnnl_success;
    ok = ok && dnnl_primitive_desc_create(&pd, &md, attr, onednn.engine, NULL) == dnnl_success &&
         dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &onednn.impl) == dnnl_success &&
         dnnl_primitive_create(&onednn.prim, pd) == dnnl_success;
    if (ok) {
        dnnl_memory_create(&onednn.a, &a, onednn.engine, DNNL_MEMORY_NONE);
        dnnl_memory_create(&onednn.b, &b, onednn.engine, DNNL_MEMORY_NONE);
        dnnl_memory_create(&onednn.c, &c, onednn.engine, DNNL_MEMORY_NONE);
        dnnl_memory_create(&onednn.bias_m, &bd, onednn.engine, DNNL_MEMORY_NONE);
    } else {
        onednn.prim = NULL;
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (ops)
        dnnl_post_ops_destroy(ops);
    dnnl_primitive_attr_destroy(attr);
    onednn.ta = ta, onednn.tb = tb, onednn.M = M, onednn.N = N, onednn.K = K;
    onednn.c_bf16 = c_bf16, onednn.bias = bias, onednn.beta = beta;
    return onednn.prim != NULL;
}

/* 1 where oneDNN runs here */
static int bench_onednn_usable(void) { return onednn_start(); }

/* the implementation oneDNN chose for the last shape ("" before any) */
static const char *bench_onednn_impl(void) { return onednn.prim ? onednn.impl : ""; }

static void bench_onednn_product(int ta, int tb, int M, int N, int K, float alpha, pt_mat A,
                                 pt_mat B, float beta, pt_mat C, const float *bias)
{
    if (alpha != 1.0f || A.dt != PT_BF16 || B.dt != PT_BF16 || !onednn_start() ||
        !onednn_prepare(ta, tb, M, N, K, A, B, beta, C, bias != NULL)) {
        pt_matmul_poison(M, N, C);
        return;
    }
    dnnl_memory_set_data_handle(onednn.a, A.p);
    dnnl_memory_set_data_handle(onednn.b, B.p);
    dnnl_memory_set_data_handle(onednn.c, C.p);
    dnnl_memory_set_data_handle(onednn.bias_m, (void *)bias);
    dnnl_exec_arg_t args[] = {{DNNL_ARG_SRC, onednn.a},
                              {DNNL_ARG_WEIGHTS, onednn.b},
                              {DNNL_ARG_DST, onednn.c},
                              {DNNL_ARG_BIAS, onednn.bias_m}};
    if (dnnl_primitive_execute(onednn.prim, onednn.stream, bias ? 4 : 3, args) != dnnl_success ||
        dnnl_stream_wait(onednn.stream) != dnnl_success)
        pt_matmul_poison(M, N, C);
}
#else
static int bench_onednn_usable(void) { return 0; }
static const char *bench_onednn_impl(void) { return ""; }
static void bench_onednn_product(int ta, int tb, int M, int N, int K, float alpha, pt_mat A,
                                 pt_mat B, float beta, pt_mat C, const float *bias)
{
    (void)ta, (void)tb, (void)K, (void)alpha, (void)A, (void)B, (void)beta, (void)bias;
    pt_matmul_poison(M, N, C);
}
#endif

#endif
