/* test_lend_idle: a pipeline worker on threads that waits for a message
 * runs a part of another worker's products and passes meanwhile
 * (pt_pipeline_config.lend_idle, gemm.h's lending), and nothing it stores
 * changes.
 *
 * GPT (2 layers, 128 channels: products and passes large enough to be cut
 * in two) at P = 2, 1f1b and zbh1, fp32 on pipetrain's own kernel and bf16
 * on the kernel the CPU takes, one BLAS thread a worker, three AdamW steps:
 *   - every micro-batch's loss and every parameter are bit-identical to the
 *     same pipeline with lending off, which lends nothing;
 *   - over the four runs with lending on, the waiting workers ran parts
 *     (pt_gemm_parts_lent grew), where the machine has a core for each
 *     worker. (How many depends on the timing: one run alone may lend none
 *     on a loaded machine.)
 * And the board alone, with no timing in it: a thread that lends offers a
 * job's last part once a thread waits (pt_gemm_spare), and the waiting
 * thread (pt_gemm_help) runs it while part 0 waits for it.
 * On a machine with one core a pipeline does not lend: then only the bits
 * are checked, and a line says so. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pipetrain.h"
#include "tensor/gemm.h"
#include "tensor/rng.h"

#include "check.h"
#include "pipeline_params.h"

#define STEPS 3
#define M     4
#define MBS   4

static pt_model_config gpt(pt_precision precision)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 4, c.n_embd = 128, c.seq_len = 64, c.vocab = 64, c.seed = 5;
    c.precision = precision;
    return c;
}

/* STEPS steps; losses[s * M + k] and the parameters into `into`; *lent
 * the parts lent meanwhile */
static int train(const char *schedule, pt_precision precision, int lend, float *losses,
                 pt_model *into, long *lent)
{
    pt_model_config c = gpt(precision);
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = 2, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = schedule;
    pc.blas_threads = 1, pc.transport = PT_PIPELINE_THREADS, pc.lend_idle = lend;
    int balance[] = {2, 2};
    pc.balance = balance, pc.n_balance = 2;
    pt_pipeline *p;
    if (pt_pipeline_create(&c, &oc, &pc, &p) != PT_OK)
        return printf("%s: %s\n", schedule, pt_last_error()), 1;
    int rows = M * MBS * c.seq_len, fail = 0;
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    pt_rng g;
    pt_rng_seed(&g, 17);
    long before = pt_gemm_parts_lent();
    for (int s = 0; s < STEPS && !fail && tok; s++) {
        for (int i = 0; i <= rows; i++)
            tok[i] = (int)pt_rng_below(&g, (uint64_t)c.vocab);
        pt_microbatch b = {.batch = M * MBS, .tokens = tok, .targets = tok + 1};
        if (pt_pipeline_train_step(p, &b, s, 1e-2f, NULL) != PT_OK) {
            printf("%s step %d: %s\n", schedule, s, pt_last_error());
            fail = 1;
            break;
        }
        memcpy(losses + (size_t)s * M, pt_pipeline_losses(p), sizeof(float) * M);
    }
    *lent = pt_gemm_parts_lent() - before;
    if (!fail && pipeline_copy_out(p, into, NULL, NULL) != pt_model_n_params(into))
        fail = (printf("%s: the workers do not hold every parameter\n", schedule), 1);
    free(tok);
    pt_pipeline_destroy(p);
    return fail || !tok;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the board alone ---- */

static atomic_int part1_ran, stop_waiting;
static pthread_t part1_thread;

/* part 1 notes that it ran and where; part 0 waits for it (10 s at most) */
static void two_parts(void *arg, int i)
{
    (void)arg;
    if (i == 1) {
        part1_thread = pthread_self();
        atomic_store(&part1_ran, 1);
        return;
    }
    for (double t0 = now_s(); !atomic_load(&part1_ran) && now_s() - t0 < 10.0;)
        sched_yield();
}

static void *waiter(void *arg)
{
    (void)arg;
    pt_gemm_wait_begin();
    while (!atomic_load(&stop_waiting))
        if (!pt_gemm_help())
            sched_yield();
    pt_gemm_wait_end();
    return NULL;
}

static void board(void)
{
    pt_blas_set_threads(1);
    pt_gemm_set_lending(1);
    CHECK(!pt_gemm_spare(), "a spare thread counted with nobody waiting");
    pthread_t t;
    if (pthread_create(&t, NULL, waiter, NULL) != 0) {
        CHECK(0, "cannot start the waiting thread");
        return;
    }
    for (double t0 = now_s(); !pt_gemm_spare() && now_s() - t0 < 10.0;)
        sched_yield();
    CHECK(pt_gemm_spare(), "a thread waits, but no spare thread is counted");
    long before = pt_gemm_parts_lent();
    pt_gemm_parallel(2, two_parts, NULL);
    long lent = pt_gemm_parts_lent() - before;
    atomic_store(&stop_waiting, 1);
    pthread_join(t, NULL);
    pt_gemm_set_lending(0);
    CHECK(atomic_load(&part1_ran) && lent == 1 && pthread_equal(part1_thread, t),
          "the last part was not run by the waiting thread (ran %d, lent %ld)",
          atomic_load(&part1_ran), lent);
    CHECK(!pt_gemm_spare(), "a spare thread counted after the wait ended");
    printf("board: the waiting thread ran the lent part\n");
}

/* ---- a pipeline ---- */

static long lent_in_all; /* parts lent over every run with lending on */

static void lends_same_bits(const char *schedule, pt_precision precision, int cores)
{
    const char *what = pt_precision_name(precision);
    float with[STEPS * M], without[STEPS * M];
    pt_model_config c = gpt(precision);
    pt_model *mw, *mo;
    if (pt_model_create(&c, &mw) != PT_OK || pt_model_create(&c, &mo) != PT_OK) {
        CHECK(0, "model: %s", pt_last_error());
        return;
    }
    long lent_on = 0, lent_off = 0;
    int fail = train(schedule, precision, 1, with, mw, &lent_on);
    fail |= train(schedule, precision, 0, without, mo, &lent_off);
    CHECK(!fail, "%s %s: a run failed", schedule, what);
    if (!fail) {
        CHECK(!memcmp(with, without, sizeof with),
              "%s %s: a micro-batch's loss differs with lending", schedule, what);
        int which, i = pipeline_first_difference(mw, NULL, mo, NULL, NULL, &which);
        CHECK(i < 0, "%s %s: parameter %s differs with lending", schedule, what,
              i < 0 ? "" : pt_model_param(mw, i)->name);
        CHECK(lent_off == 0, "%s %s: lending off, %ld parts were lent", schedule, what, lent_off);
        lent_in_all += cores >= 2 ? lent_on : 0;
        printf("%-5s %s: bit-identical with and without lending, %ld parts lent\n", schedule, what,
               lent_on);
    }
    pt_model_destroy(mw);
    pt_model_destroy(mo);
}

int main(void)
{
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 2)
        printf("one core: a pipeline of two workers does not lend here; the bits alone are "
               "checked\n");
    if (pt_fp32_set_kernel("auto") != PT_OK || !strcmp(pt_fp32_kernel(), "openblas"))
        pt_fp32_set_kernel("generic"); /* pipetrain's own products are the ones cut */
    printf("fp32 products on %s, bf16 on %s\n", pt_fp32_kernel(), pt_bf16_kernel());
    board();
    const char *schedules[] = {"1f1b", "zbh1"};
    for (int s = 0; s < 2; s++) {
        lends_same_bits(schedules[s], PT_PRECISION_FP32, (int)cores);
        lends_same_bits(schedules[s], PT_PRECISION_BF16, (int)cores);
    }
    if (cores >= 2)
        CHECK(lent_in_all > 0, "lending on, no waiting worker ran a part in any run");
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
