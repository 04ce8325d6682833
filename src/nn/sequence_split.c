/* sequence_split.c: a slice's rows into and out of a whole buffer
 * (sequence_split.h). */
#include "nn/sequence_split.h"

#include <string.h>

#include "tensor/bf16.h"

void pt_seq_put(float *whole, const void *own, pt_elem_type t, pt_seq_rows r)
{
    size_t rows = (size_t)r.R * r.C;
    for (int i = 0; i < r.B; i++) {
        const void *from = pt_elems_at(own, pt_seq_own_at(r, i), t);
        float *to = whole + pt_seq_whole_at(r, i);
        if (t == PT_BF16)
            pt_bf16_to_floats(to, from, rows);
        else
            memcpy(to, from, rows * sizeof(float));
    }
}

void pt_seq_take(const pt_kernels *k, void *own, const float *whole, pt_seq_rows r)
{
    size_t rows = (size_t)r.R * r.C;
    for (int i = 0; i < r.B; i++)
        k->store_floats(pt_elems_at(own, pt_seq_own_at(r, i), k->act),
                        whole + pt_seq_whole_at(r, i), rows);
}
