/* projection.c: the bias-free projection of PyTorch's layout (projection.h). */
#include "nn/projection.h"

void pt_projection_forward(const pt_block *b, int w, void *y, int ldy, const void *x, int ldx,
                           int N, int in, int out)
{
    b->k->matmul(0, 1, N, out, in, 1.0f, pt_block_act(b, x, ldx), pt_block_weight(b, w, in), 0.0f,
                 pt_block_act(b, y, ldy), NULL);
}

void pt_projection_backward_input(const pt_block *b, int w, void *dx, int ldx, const void *dy,
                                  int ldy, int N, int in, int out, float beta)
{
    b->k->matmul(0, 0, N, in, out, 1.0f, pt_block_act(b, dy, ldy), pt_block_weight(b, w, in), beta,
                 pt_block_act(b, dx, ldx), NULL);
}

void pt_projection_backward_weight(pt_block *b, int w, const void *dy, int ldy, const void *x,
                                   int ldx, int N, int in, int out)
{
    b->k->matmul(1, 0, out, in, N, 1.0f, pt_block_act(b, dy, ldy), pt_block_act(b, x, ldx), 1.0f,
                 pt_mat_of(b->g[w], in, PT_F32), NULL);
}

int pt_projection_declare(pt_block *b, const char *name, int in, int out, float std)
{
    int shape[2] = {out, in};
    return pt_block_declare(b, name, 2, shape, PT_INIT_NORMAL, std);
}
