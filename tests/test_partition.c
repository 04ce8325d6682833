/* test_partition: cutting blocks into chunks.
 * - "--balance" text is parsed, and balances are refused with a message that
 *   says what is wrong (the model's block count, the chunk count, the entry);
 * - the dynamic program's slowest chunk equals brute force's over every cut,
 *   on random synthetic costs, for many block and chunk counts;
 * - a memory cap is honoured (every chosen chunk fits), costs time when it
 *   binds, and an impossible cap is refused;
 * - the profiler measures every block of a real model, and blocks that do
 *   the same work share their times (timed once). */
#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "plan/partition.h"
#include "tensor/rng.h"

#include "check.h"

/* Smallest slowest-chunk time over every cut (chunks within the cap). */
static double brute(const pt_block_profile *prof, int n, int K, size_t cap, int inflight, int start)
{
    if (K == 1) {
        if (cap && pt_partition_chunk_memory(prof, start, n - 1, inflight) > cap)
            return DBL_MAX;
        return pt_partition_chunk_time(prof, start, n - 1);
    }
    double best = DBL_MAX;
    for (int end = start; end <= n - K; end++) {
        if (cap && pt_partition_chunk_memory(prof, start, end, inflight) > cap)
            continue;
        double here = pt_partition_chunk_time(prof, start, end);
        double rest = brute(prof, n, K - 1, cap, inflight, end + 1);
        double v = here > rest ? here : rest;
        best = v < best ? v : best;
    }
    return best;
}

int main(void)
{
    int bal[16], n;
    REQUIRE(pt_partition_parse_balance("2,3,3", bal, 16, &n) == PT_OK && n == 3 && bal[0] == 2 &&
                bal[1] == 3 && bal[2] == 3,
            "2,3,3 parsed wrong");
    REQUIRE(pt_partition_parse_balance("2,x,3", bal, 16, &n) == PT_EINVAL &&
                strstr(pt_last_error(), "entry 2"),
            "2,x,3: %s", pt_last_error());
    REQUIRE(pt_partition_parse_balance("2,0", bal, 16, &n) == PT_EINVAL, "a zero entry accepted");
    REQUIRE(pt_partition_parse_balance("2;3", bal, 16, &n) == PT_EINVAL, "2;3 accepted");
    REQUIRE(pt_partition_parse_balance("", bal, 16, &n) == PT_EINVAL, "empty balance accepted");
    REQUIRE(pt_partition_parse_balance("1,1,1", bal, 2, &n) == PT_EINVAL, "too many entries");
    int b1[] = {2, 3, 2};
    REQUIRE(pt_partition_check_balance(b1, 3, 3, 8) == PT_EINVAL &&
                strstr(pt_last_error(), "8 blocks") && strstr(pt_last_error(), "sums to 7"),
            "a balance summing to 7 for 8 blocks: %s", pt_last_error());
    REQUIRE(pt_partition_check_balance(b1, 3, 4, 7) == PT_EINVAL &&
                strstr(pt_last_error(), "one per chunk (4"),
            "3 entries for 4 chunks: %s", pt_last_error());
    REQUIRE(pt_partition_check_balance(b1, 3, 3, 7) == PT_OK, "a good balance refused: %s",
            pt_last_error());

    /* the dynamic program against brute force */
    pt_rng r;
    pt_rng_seed(&r, 42);
    pt_block_profile prof[12];
    int trials = 0;
    for (int t = 0; t < 60; t++) {
        int nb = 2 + (int)pt_rng_below(&r, 10);
        for (int i = 0; i < nb; i++) {
            prof[i].f = 0.1 + pt_rng_uniform(&r);
            prof[i].b = prof[i].f * (1 + pt_rng_uniform(&r));
            prof[i].w = prof[i].f * pt_rng_uniform(&r);
            prof[i].param_bytes = 1000 + (size_t)pt_rng_below(&r, 5000);
            prof[i].activation_bytes = 500 + (size_t)pt_rng_below(&r, 3000);
        }
        for (int K = 1; K <= nb; K++) {
            for (int capped = 0; capped < 2; capped++) {
                size_t cap = 0;
                if (capped) { /* a cap between the largest block and the whole model */
                    size_t big = 0, all = pt_partition_chunk_memory(prof, 0, nb - 1, 2);
                    for (int i = 0; i < nb; i++) {
                        size_t m = pt_partition_chunk_memory(prof, i, i, 2);
                        big = m > big ? m : big;
                    }
                    cap = big + (size_t)(pt_rng_uniform(&r) * (double)(all - big) / K);
                }
                double want = brute(prof, nb, K, cap, 2, 0), got = -1;
                int balance[12];
                int rc = pt_partition_solve(prof, nb, K, cap, 2, balance, &got);
                if (want == DBL_MAX) {
                    REQUIRE(rc == PT_EINVAL && strstr(pt_last_error(), "fits"),
                            "n=%d K=%d cap %zu: no cut fits, yet the solver said %d", nb, K, cap,
                            rc);
                    continue;
                }
                REQUIRE(rc == PT_OK, "n=%d K=%d: %s", nb, K, pt_last_error());
                REQUIRE(pt_partition_check_balance(balance, K, K, nb) == PT_OK,
                        "n=%d K=%d: the solver's balance is not a cut: %s", nb, K, pt_last_error());
                double slowest = 0;
                for (int c = 0, b = 0; c < K; b += balance[c++]) {
                    double tc = pt_partition_chunk_time(prof, b, b + balance[c] - 1);
                    slowest = tc > slowest ? tc : slowest;
                    REQUIRE(!cap ||
                                pt_partition_chunk_memory(prof, b, b + balance[c] - 1, 2) <= cap,
                            "n=%d K=%d: chunk %d is over the memory cap", nb, K, c);
                }
                REQUIRE(slowest == got, "n=%d K=%d: reported %.6f, the cut's slowest %.6f", nb, K,
                        got, slowest);
                REQUIRE(got == want, "n=%d K=%d cap %zu: DP %.6f, brute force %.6f", nb, K, cap,
                        got, want);
                trials++;
            }
        }
    }
    printf("the dynamic program matched brute force on %d cuts\n", trials);
    REQUIRE(trials > 300, "too few trials (%d)", trials);

    /* a cap that binds costs time: the heavy-memory block 1 must sit alone */
    pt_block_profile p4[4] = {{1, 1, 1, 10, 100, 0, 0},
                              {1, 1, 1, 10, 10000, 0, 0},
                              {1, 1, 1, 10, 100, 0, 0},
                              {3, 3, 3, 10, 100, 0, 0}};
    int bal4[3];
    double t4;
    REQUIRE(pt_partition_solve(p4, 4, 3, 0, 1, bal4, &t4) == PT_OK && t4 == 9,
            "uncapped 4 blocks into 3: time %g", t4);
    size_t cap = pt_partition_chunk_memory(p4, 1, 1, 1) + 100;
    REQUIRE(pt_partition_solve(p4, 4, 3, cap, 1, bal4, &t4) == PT_OK && bal4[0] == 1 &&
                bal4[1] == 1 && bal4[2] == 2 && t4 == 12,
            "capped: %d,%d,%d time %g", bal4[0], bal4[1], bal4[2], t4);
    REQUIRE(pt_partition_solve(p4, 4, 3, 1000, 1, bal4, &t4) == PT_EINVAL &&
                strstr(pt_last_error(), "largest block"),
            "an impossible cap: %s", pt_last_error());
    REQUIRE(pt_partition_solve(p4, 4, 5, 0, 1, bal4, &t4) == PT_EINVAL, "5 chunks of 4 blocks");

    /* the profiler on a real model */
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    pt_block_profile mp[4];
    REQUIRE(pt_profile_blocks(&c, 2, 3, mp) == PT_OK, "profile: %s", pt_last_error());
    for (int i = 0; i < 4; i++)
        REQUIRE(mp[i].f > 0 && mp[i].b > 0 && mp[i].activation_bytes > 0,
                "block %d: f %g b %g act %zu", i, mp[i].f, mp[i].b, mp[i].activation_bytes);
    REQUIRE(mp[1].param_bytes > 0 && mp[1].w > 0, "transformer block without weights");
    /* the two transformer layers do the same work: they share their times,
     * so noise does not decide the cut; the embedding and the head do not */
    CHECK(mp[1].f == mp[2].f && mp[1].b == mp[2].b && mp[1].w == mp[2].w,
          "equal layers timed apart: f %g %g, b %g %g, w %g %g", mp[1].f, mp[2].f, mp[1].b, mp[2].b,
          mp[1].w, mp[2].w);
    CHECK(mp[0].f != mp[1].f && mp[3].f != mp[1].f, "the embedding or head took a layer's time");

    /* fp32: a chunk also holds the panels its products keep of its matrices
     * (none with repack_weights), as the memory prediction counts them */
    pt_model *desc;
    REQUIRE(pt_model_describe(&c, &desc) == PT_OK, "describe: %s", pt_last_error());
    c.repack_weights = 1;
    pt_block_profile rp[4];
    REQUIRE(pt_profile_blocks(&c, 2, 3, rp) == PT_OK, "profile: %s", pt_last_error());
    c.repack_weights = 0;
    for (int i = 0; i < 4; i++) {
        CHECK(mp[i].copy_bytes == pt_model_panel_bytes(desc, i, i) && rp[i].copy_bytes == 0,
              "fp32 block %d: copies of %zu bytes with panels kept, %zu repacked; panels %zu", i,
              mp[i].copy_bytes, rp[i].copy_bytes, pt_model_panel_bytes(desc, i, i));
        CHECK(rp[i].param_bytes == mp[i].param_bytes, "fp32 block %d: repacking changed it", i);
    }
    pt_model_destroy(desc);

    /* bf16: a chunk also holds the products' bf16 copy of its parameters,
     * half their float bytes, and the tiles its products keep of them
     * (AMX's; none on the other bf16 products), as the memory prediction
     * counts them */
    c.precision = PT_PRECISION_BF16;
    REQUIRE(pt_model_describe(&c, &desc) == PT_OK, "describe: %s", pt_last_error());
    pt_block_profile hp[4];
    REQUIRE(pt_profile_blocks(&c, 2, 3, hp) == PT_OK, "bf16 profile: %s", pt_last_error());
    size_t tiles[4];
    for (int i = 0; i < 4; i++) {
        tiles[i] = pt_model_panel_bytes(desc, i, i);
        CHECK(hp[i].param_bytes == mp[i].param_bytes &&
                  hp[i].copy_bytes == hp[i].param_bytes / 2 + tiles[i],
              "bf16 block %d: parameters %zu, copy %zu bytes, kept tiles %zu", i,
              hp[i].param_bytes, hp[i].copy_bytes, tiles[i]);
    }
    pt_model_destroy(desc);
    CHECK(pt_partition_chunk_memory(hp, 1, 1, 2) == 4 * hp[1].param_bytes + hp[1].param_bytes / 2 +
                                                        tiles[1] + 2 * hp[1].activation_bytes +
                                                        hp[1].grad_bytes,
          "a bf16 chunk's memory leaves out its bf16 copy");
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
