/* scratch.h: per-thread working memory of the kernels.
 *
 * A product that packs or converts its operands needs room the size of
 * them. Each thread keeps a few slots, each grown to the largest request it
 * has seen (so after a model's first step nothing is allocated again) and
 * freed when the thread ends. */
#ifndef PT_TENSOR_SCRATCH_H
#define PT_TENSOR_SCRATCH_H

#include <stddef.h>

/* 0-3: the bf16 products (2-3: the portable ones' in gemm.c; none runs a
 * product of gemm.c while it holds any of 0-3), 4-5: gemm.c, 6: a block's
 * piece of work on a helper thread (attention.c), 7: a head's keys and
 * values packed for its bands (attention.c) */
enum { PT_SCRATCH_SLOTS = 8, PT_SCRATCH_PIECE = 6, PT_SCRATCH_HEAD_PANELS = 7 };

/* At least `bytes` bytes of slot `slot` (0 .. PT_SCRATCH_SLOTS-1) of the
 * calling thread, 64-byte aligned; NULL when they cannot be allocated. The
 * contents are not kept across calls that grow the slot. */
void *pt_scratch(int slot, size_t bytes);

#endif
