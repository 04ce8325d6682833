/* kernel_acts.h: test inputs as a kernel table's activations. */
#ifndef PT_TESTS_KERNEL_ACTS_H
#define PT_TESTS_KERNEL_ACTS_H

#include <stdlib.h>
#include <string.h>

#include "tensor/bf16.h"
#include "tensor/kernels.h"

/* n floats as the table's activations (bf16 ones rounded), malloc'd */
static inline void *kernel_acts(const pt_kernels *k, const float *x, size_t n)
{
    void *out = malloc(n * pt_elem_size(k->act));
    if (out && k->act == PT_BF16)
        pt_bf16_from_floats(out, x, n);
    else if (out)
        memcpy(out, x, n * sizeof(float));
    return out;
}

#endif
