/* partition.h: which blocks go to which chunk (virtual stage).
 *
 * A partition cuts the model's n blocks into K contiguous chunks, given as
 * blocks per chunk ("--balance 2,3,3"). By hand it is checked here; without
 * one, profile.c measures every block (forward, backward-input,
 * backward-weight time and activation bytes on micro-batches of the
 * configured size) and partition.c's dynamic program picks the cut that
 * minimises the slowest chunk's time, subject to a memory cap per chunk, as
 * PipeDream's optimiser does. Called by the pipeline (src/runtime/) and by
 * `pipetrain plan`. */
#ifndef PT_PLAN_PARTITION_H
#define PT_PLAN_PARTITION_H

#include <stddef.h>

#include "pipetrain.h"

#define PT_PARTITION_MAX_CHUNKS 256

/* What one block costs on one micro-batch. */
typedef struct {
    double f, b, w;          /* seconds: forward, backward-input, backward-weight */
    size_t activation_bytes; /* kept from forward to the weight pass, per micro-batch */
    size_t param_bytes;
    size_t copy_bytes; /* the products' copies of the parameters: bf16's, and the panels a
                        * stage keeps of its matrices (pt_model_panel_bytes) */
    size_t grad_bytes; /* kept from backward to the weight pass, per micro-batch */
} pt_block_profile;

/* Parses "2,3,3" into balance[] (at most max entries); PT_EINVAL with a
 * message naming the bad entry. */
int pt_partition_parse_balance(const char *text, int *balance, int max, int *n);
/* Checks one entry per chunk, each >= 1, summing to the model's block count;
 * the message says the count. */
int pt_partition_check_balance(const int *balance, int n_balance, int n_chunks, int n_blocks);

/* Memory of a chunk holding blocks first..last with `inflight` micro-batches'
 * activations alive: parameters, gradients and two optimizer moments, plus
 * the activations, and one micro-batch's gradients between its backward and
 * its weight pass (fused backwards hold no more). */
size_t pt_partition_chunk_memory(const pt_block_profile *prof, int first, int last, int inflight);
double pt_partition_chunk_time(const pt_block_profile *prof, int first, int last);

/* The contiguous cut of n_blocks into n_chunks minimising the slowest chunk's
 * f + b + w, with every chunk's memory (above) at most max_memory when that is
 * not 0. Writes balance[n_chunks] and the slowest chunk's time; PT_EINVAL
 * when no cut fits the cap (the message gives the smallest cap that would). */
int pt_partition_solve(const pt_block_profile *prof, int n_blocks, int n_chunks, size_t max_memory,
                       int inflight, int *balance, double *max_time);

/* profile.c: measures every block of the model `cfg` describes on random
 * micro-batches of `batch` samples, the median of `reps` runs (after one
 * warm-up), building one block at a time; blocks that do the same work
 * (kind, FLOPs, parameters, activations) then share the median of their
 * times. prof has n_blocks entries. */
int pt_profile_blocks(const pt_model_config *cfg, int batch, int reps, pt_block_profile *prof);

#endif
