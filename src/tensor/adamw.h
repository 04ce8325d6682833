/* adamw.h: the optimizer's passes over parameters: AdamW's update in one
 * pass over weights, gradients and both moments, and the sum of squares
 * that the gradient clip needs, each on the widest vectors the CPU has
 * (simd.h). Every path gives the same bits: the update is elementwise with
 * the same float operations in the same order, and the sum keeps eight
 * partial sums (element i in sum i mod 8) added in one fixed order. Called
 * by src/runtime/optimizer.c. */
#ifndef PT_TENSOR_ADAMW_H
#define PT_TENSOR_ADAMW_H

#include <stddef.h>

/* One AdamW step's numbers, the same for every element. */
typedef struct {
    float beta1, beta2, eps;
    float corr1, corr2; /* 1 - beta^t, the bias corrections */
    float lr, clip;     /* the gradient is multiplied by clip first */
    float decay;        /* decoupled weight decay (0: none) */
} pt_adamw_step;

/* For each of n elements: grad = g clip; m1, m2 move toward grad, grad^2;
 * w -= lr (m1/corr1 / (sqrt(m2/corr2) + eps) + decay w). */
void pt_adamw_update(const pt_adamw_step *s, float *w, const float *g, float *m1, float *m2,
                     size_t n);

/* sum of x[i]^2 over n, in double */
double pt_sum_squares(const float *x, size_t n);

#endif
