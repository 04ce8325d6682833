/* scratch.h: per-thread working memory of the kernels.
 *
 * A product that packs or converts its operands needs room the size of
 * them. Each thread keeps a few slots, each grown to the largest request it
 * has seen (so after a model's first step nothing is allocated again) and
 * freed when the thread ends. Called by the bf16 products. */
#ifndef PT_TENSOR_SCRATCH_H
#define PT_TENSOR_SCRATCH_H

#include <stddef.h>

enum { PT_SCRATCH_SLOTS = 6 }; /* 0-3: the bf16 products, 4-5: gemm.c */

/* At least `bytes` bytes of slot `slot` (0 .. PT_SCRATCH_SLOTS-1) of the
 * calling thread, 64-byte aligned; NULL when they cannot be allocated. The
 * contents are not kept across calls that grow the slot. */
void *pt_scratch(int slot, size_t bytes);

#endif
