/* partition.c: checking a hand-made balance and choosing one (partition.h).
 *
 * The chooser is PipeDream's dynamic program without replicas: best[k][j] is
 * the smallest possible slowest-chunk time when blocks 0..j-1 form k chunks,
 *     best[k][j] = min over i < j of max(best[k-1][i], time(i..j-1)),
 * restricted to chunks whose memory fits the cap. O(K n^2) with prefix sums. */
#include "plan/partition.h"

#include <errno.h>
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

int pt_partition_parse_balance(const char *text, int *balance, int max, int *n)
{
    *n = 0;
    const char *s = text;
    if (!s || !*s)
        return pt_fail(PT_EINVAL, "balance is empty: give blocks per stage, like 2,3,3");
    for (;;) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (end == s || errno || v < 1 || v > 1000000)
            return pt_fail(PT_EINVAL, "balance '%s': entry %d is not a positive block count", text,
                           *n + 1);
        if (*n >= max)
            return pt_fail(PT_EINVAL, "balance '%s' has more than %d entries", text, max);
        balance[(*n)++] = (int)v;
        if (*end == '\0')
            return PT_OK;
        if (*end != ',')
            return pt_fail(PT_EINVAL, "balance '%s': unexpected '%c' after entry %d", text, *end,
                           *n);
        s = end + 1;
    }
}

int pt_partition_check_balance(const int *balance, int n_balance, int n_chunks, int n_blocks)
{
    if (n_balance != n_chunks)
        return pt_fail(PT_EINVAL,
                       "balance has %d entries; it needs one per chunk (%d: stages "
                       "x virtual stages)",
                       n_balance, n_chunks);
    long sum = 0;
    for (int i = 0; i < n_balance; i++) {
        if (balance[i] < 1)
            return pt_fail(PT_EINVAL,
                           "balance entry %d is %d; every chunk needs at least one "
                           "block",
                           i + 1, balance[i]);
        sum += balance[i];
    }
    if (sum != n_blocks)
        return pt_fail(PT_EINVAL, "balance sums to %ld blocks, but the model has %d blocks", sum,
                       n_blocks);
    return PT_OK;
}

double pt_partition_chunk_time(const pt_block_profile *prof, int first, int last)
{
    double t = 0;
    for (int i = first; i <= last; i++)
        t += prof[i].f + prof[i].b + prof[i].w;
    return t;
}

size_t pt_partition_chunk_memory(const pt_block_profile *prof, int first, int last, int inflight)
{
    size_t bytes = 0;
    for (int i = first; i <= last; i++)
        bytes += 4 * prof[i].param_bytes + prof[i].copy_bytes +
                 (size_t)inflight * prof[i].activation_bytes + prof[i].grad_bytes;
    return bytes;
}

int pt_partition_solve(const pt_block_profile *prof, int n, int K, size_t cap, int inflight,
                       int *balance, double *max_time)
{
    if (K < 1 || K > n)
        return pt_fail(PT_EINVAL,
                       "cannot cut %d blocks into %d chunks: each chunk needs at "
                       "least one block",
                       n, K);
    size_t cells = (size_t)(K + 1) * (size_t)(n + 1);
    double *best = malloc(sizeof(double) * cells);
    int *from = malloc(sizeof(int) * cells);
    if (!best || !from) {
        free(best);
        free(from);
        return pt_fail(PT_ENOMEM, "cannot allocate the partition table");
    }
#define AT(k, j) ((size_t)(k) * (size_t)(n + 1) + (size_t)(j))
    for (size_t i = 0; i < cells; i++)
        best[i] = DBL_MAX, from[i] = -1;
    best[AT(0, 0)] = 0;
    for (int k = 1; k <= K; k++)
        for (int j = k; j <= n; j++)
            for (int i = k - 1; i < j; i++) {
                if (best[AT(k - 1, i)] == DBL_MAX)
                    continue;
                if (cap && pt_partition_chunk_memory(prof, i, j - 1, inflight) > cap)
                    continue;
                double t = pt_partition_chunk_time(prof, i, j - 1);
                double v = best[AT(k - 1, i)] > t ? best[AT(k - 1, i)] : t;
                if (v < best[AT(k, j)])
                    best[AT(k, j)] = v, from[AT(k, j)] = i;
            }
    int rc = PT_OK;
    if (best[AT(K, n)] == DBL_MAX) {
        /* the smallest cap that fits: the largest single block's memory is a
         * lower bound; report the cost of the most even cut instead of guessing */
        size_t need = 0;
        for (int i = 0; i < n; i++) {
            size_t b = pt_partition_chunk_memory(prof, i, i, inflight);
            need = b > need ? b : need;
        }
        rc = pt_fail(PT_EINVAL,
                     "no cut of %d blocks into %d chunks fits %zu bytes per chunk "
                     "(the largest block alone needs %zu)",
                     n, K, cap, need);
    } else {
        int j = n;
        for (int k = K; k >= 1; k--) {
            int i = from[AT(k, j)];
            balance[k - 1] = j - i;
            j = i;
        }
        if (max_time)
            *max_time = best[AT(K, n)];
    }
#undef AT
    free(best);
    free(from);
    return rc;
}
