/* model_limits.c: see model_limits.h. The byte counts come from the model's
 * description (pt_model_describe: every block, no tensors), which is only
 * built once the shape check has bounded every product it computes. */
#include "cli/model_limits.h"

#include <stdio.h>
#include <unistd.h>

#define INT_INDEX 2147483647ull /* the most rows or floats a block indexes */

static uint64_t machine_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    uint64_t bytes;
    if (pages <= 0 || size <= 0 || num_mul((uint64_t)pages, (uint64_t)size, &bytes))
        return UINT64_MAX; /* unknown: no limit */
    return bytes;
}

static const char *show_bytes(uint64_t bytes, char *buf, size_t n)
{
    snprintf(buf, n, "%llu bytes (%.1f GiB)", (unsigned long long)bytes,
             (double)bytes / (1024.0 * 1024.0 * 1024.0));
    return buf;
}

/* floats of one layer's attention probabilities: mbs x heads x seq^2 */
static int attention_floats(const pt_model_config *cfg, int mbs, uint64_t *out)
{
    uint64_t x;
    return num_mul((uint64_t)mbs, (uint64_t)cfg->n_head, &x) ||
           num_mul(x, (uint64_t)cfg->seq_len, &x) || num_mul(x, (uint64_t)cfg->seq_len, &x) ||
           num_mul(x, sizeof(float), out);
}

int model_limits_shape(const char *cmd, const pt_model_config *cfg, int batch)
{
    uint64_t x;
    if (cfg->kind == PT_MODEL_SPEC) /* the library checks each layer's widths itself */
        return 0;
    if (cfg->kind == PT_MODEL_MLP) {
        int widest = 0;
        for (int i = 0; i < cfg->n_widths; i++)
            widest = cfg->widths[i] > widest ? cfg->widths[i] : widest;
        if (num_mul((uint64_t)batch, (uint64_t)widest, &x) || x > INT_INDEX) {
            fprintf(stderr,
                    "pipetrain %s: --batch %d: %d samples x a layer of %d (--widths) is %llu "
                    "floats; the layers index at most %llu\n",
                    cmd, batch, batch, widest, (unsigned long long)x, INT_INDEX);
            return 2;
        }
        return 0;
    }
    /* the MLP's width: n_inner, or 4 x --embd when it is 0 */
    uint64_t T = (uint64_t)cfg->seq_len, V = (uint64_t)cfg->vocab;
    uint64_t inner = cfg->n_inner > 0 ? (uint64_t)cfg->n_inner : 4 * (uint64_t)cfg->n_embd;
    uint64_t width = V > inner ? V : inner;
    if (num_mul((uint64_t)batch, T, &x) || x > INT_INDEX) {
        fprintf(stderr,
                "pipetrain %s: --seq %d: a batch of %d samples (--batch) x %d tokens is %llu "
                "tokens; the blocks index at most %llu\n",
                cmd, cfg->seq_len, batch, cfg->seq_len, (unsigned long long)x, INT_INDEX);
        return 2;
    }
    if (num_mul(T, width, &x) || x > INT_INDEX) {
        fprintf(stderr,
                "pipetrain %s: --seq %d: a sample of %d tokens x %llu floats each (the larger of "
                "--vocab and the MLP width, n_inner or 4 x --embd) is %llu floats; the blocks "
                "index at most %llu\n",
                cmd, cfg->seq_len, cfg->seq_len, (unsigned long long)width, (unsigned long long)x,
                INT_INDEX);
        return 2;
    }
    if (attention_floats(cfg, batch, &x) || x > (UINT64_MAX >> 8)) {
        fprintf(stderr,
                "pipetrain %s: --seq %d: the attention of %d samples (--batch) x %d heads "
                "(--heads) x %d^2 positions overflows 64-bit sizes\n",
                cmd, cfg->seq_len, batch, cfg->n_head, cfg->seq_len);
        return 2;
    }
    return 0;
}

int model_limits_memory(const char *cmd, const pt_model_config *cfg, int mbs, const char *mbs_flags,
                        int moments, int whole)
{
    if (cfg->kind == PT_MODEL_SPEC) /* the activations' allocation says what it needs */
        return 0;
    uint64_t limit = machine_bytes(), att;
    char need[64], have[64];
    if (cfg->kind == PT_MODEL_GPT && (attention_floats(cfg, mbs, &att) || att > limit)) {
        fprintf(stderr,
                "pipetrain %s: --seq %d: one layer's attention for a micro-batch of %d samples "
                "(%s) x %d heads (--heads) x %d^2 positions needs %s; this machine has %s of "
                "memory\n",
                cmd, cfg->seq_len, mbs, mbs_flags, cfg->n_head, cfg->seq_len,
                show_bytes(att, need, sizeof need), show_bytes(limit, have, sizeof have));
        return 2;
    }
    pt_model *desc;
    if (pt_model_describe(cfg, &desc) != PT_OK)
        return 0; /* a shape the library refuses: it says why when the command builds it */
    int n = pt_model_n_blocks(desc);
    uint64_t params = 0, acts = 0, copies = 2 + (uint64_t)moments;
    if (whole) {
        params = pt_model_param_bytes(desc, 0, n - 1);
        acts = pt_model_activation_bytes(desc, 0, n - 1, mbs);
    }
    for (int b = 0; !whole && b < n; b++) {
        uint64_t p = pt_model_param_bytes(desc, b, b),
                 a = pt_model_activation_bytes(desc, b, b, mbs);
        if (copies * p + a > copies * params + acts)
            params = p, acts = a;
    }
    pt_model_destroy(desc);
    uint64_t total = copies * params + acts; /* bounded by the shape check */
    if (total > limit) {
        char p[64], a[64];
        fprintf(stderr,
                "pipetrain %s: the model needs %s%s: %s for its parameters, gradients and "
                "optimizer moments (%s) and %s for the activations of one micro-batch of %d "
                "samples (%s%s); this machine has %s of memory\n",
                cmd, show_bytes(total, need, sizeof need), whole ? "" : " for one block",
                show_bytes(copies * params, p, sizeof p),
                cfg->kind == PT_MODEL_GPT ? "--layers, --embd, --vocab" : "--widths",
                show_bytes(acts, a, sizeof a), mbs, mbs_flags,
                cfg->kind == PT_MODEL_GPT ? ", --seq" : "", show_bytes(limit, have, sizeof have));
        return 2;
    }
    return 0;
}
