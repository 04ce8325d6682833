/* conv.h: 2-d convolution of NCHW samples, as torch.nn.Conv2d computes it,
 * through im2col and the seam's matmul: a sample's windows are laid out as
 * the columns of col (Cin k k, OH OW), and
 *   out (Cout, OH OW) = W (Cout, Cin k k) col (+ bias on each channel)
 * with W stored (Cout, Cin, k, k) as PyTorch stores it. The pieces the
 * conv2d block and the residual block share. A 1x1 convolution with stride
 * 1 and no padding is its own col: it reads the input in place. */
#ifndef PT_NN_CONV_H
#define PT_NN_CONV_H

#include "nn/block.h"

typedef struct {
    pt_window g; /* over the input (Cin, H, W) */
    int out_c;
} pt_conv;

pt_conv pt_conv_make(int in_c, int H, int W, int out_c, int kernel, int stride, int pad);
/* floats of a sample's input and output */
size_t pt_conv_in_elems(const pt_conv *c);
size_t pt_conv_out_elems(const pt_conv *c);
/* elements of a sample's col (0 for a pointwise convolution) */
size_t pt_conv_col_elems(const pt_conv *c);

/* <prefix>.weight (Cout, Cin, k, k), He-initialised, and unless no_bias
 * <prefix>.bias (Cout); returns the weight's index (the bias follows) */
int pt_conv_declare(pt_block *b, const char *prefix, const pt_conv *c, int no_bias);

// in (B,Cin,H,W) -> out (B,Cout,OH,OW); col (B, Cin k k, OH OW) kept for
// backward_weight. bias: the bias's parameter index, -1 for none.
void pt_conv_forward(const pt_block *b, int w, int bias, const pt_conv *c, void *out, void *col,
                     const void *in, int B);
// dout (B,Cout,OH,OW) -> din (B,Cin,H,W); dcol: room for one sample's col
void pt_conv_backward_input(const pt_block *b, int w, const pt_conv *c, void *din, void *dcol,
                            const void *dout, int B);
// dW += dout col^T, dbias += dout's channel sums
void pt_conv_backward_weight(pt_block *b, int w, int bias, const pt_conv *c, const void *dout,
                             const void *col, const void *in, int B);
/* FLOPs per sample of the product (forward, and each backward) */
double pt_conv_flops(const pt_conv *c);

#endif
