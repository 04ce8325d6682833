/* blas_threads.c: how many threads each BLAS product may use.
 *
 * OpenBLAS keeps one process-wide count. Pipeline workers each run their own
 * products, so the count set here is per worker: with P workers on C cores,
 * C / P threads each keeps every core busy and none oversubscribed. */
#include <cblas.h>

#include "tensor/error.h"

int pt_blas_set_threads(int n)
{
    if (n < 1)
        return pt_fail(PT_EINVAL, "BLAS threads must be at least 1 (got %d)", n);
    openblas_set_num_threads(n);
    return PT_OK;
}

int pt_blas_threads(void) { return openblas_get_num_threads(); }
