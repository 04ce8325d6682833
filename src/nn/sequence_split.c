/* sequence_split.c: a slice's rows into and out of a whole buffer
 * (sequence_split.h). */
#include "nn/sequence_split.h"

#include <string.h>

void pt_seq_put(float *whole, const float *own, pt_seq_rows r)
{
    size_t rows = (size_t)r.R * r.C;
    for (int i = 0; i < r.B; i++)
        memcpy(whole + pt_seq_whole_at(r, i), own + pt_seq_own_at(r, i), rows * sizeof(float));
}

void pt_seq_take(float *own, const float *whole, pt_seq_rows r)
{
    size_t rows = (size_t)r.R * r.C;
    for (int i = 0; i < r.B; i++)
        memcpy(own + pt_seq_own_at(r, i), whole + pt_seq_whole_at(r, i), rows * sizeof(float));
}
