/* test_mpi_pipeline_fault: a rank of an MPI pipeline dies or hangs in the
 * middle of training; the job ends non-zero within 30 s with a message
 * naming the rank, and the checkpoint written before stays intact.
 *
 * Run alone (as CTest does), the program starts itself under mpirun with 2
 * ranks ($PT_MPIEXEC, $PT_MPIEXEC_FLAGS) and PIPETRAIN_TIMEOUT=3, three
 * times:
 *   1. rank 1 dies (_exit from a second thread while the rank is inside its
 *      steps), default launch: Open MPI ends the job, non-zero, naming it;
 *   2. rank 1 hangs (stops calling the pipeline): rank 0's wait fails within
 *      the deadline, it prints a message naming rank 1 and exits 1;
 *   3. rank 1 dies with Open MPI's reflex off
 *      (OMPI_MCA_orte_abort_on_non_zero_status=0): rank 0's own message
 *      names rank 1 (mpirun's status is its own choice, not checked).
 * Every job trains a 2-stage 1f1b gpt; after step 2 every rank writes its
 * stage's shard of a checkpoint set. After each job this process loads that
 * set and checks it bit for bit against the threads pipeline after the same
 * 2 steps. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "train/stage_checkpoint.h"
#include "mpi_launch.h"
#include "pipeline_params.h"
#include "pipetrain.h"
#include "runtime/optimizer.h"
#include "tensor/rng.h"

#define RANKS      2
#define SAVE_AFTER 2 /* steps */
#define FAIL_AT    4 /* step at which rank 1 fails */
#define MBS        2
#define M          4
#define LR         1e-2f

static pt_model_config gpt_config(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 4, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32, c.seed = 3;
    return c;
}

static void make_batch(const pt_model_config *c, int s, int *tokens, pt_microbatch *mb)
{
    pt_rng r;
    pt_rng_seed(&r, 500 + (uint64_t)s);
    int rows = M * MBS * c->seq_len;
    for (int i = 0; i <= rows; i++)
        tokens[i] = (int)pt_rng_below(&r, (uint64_t)c->vocab);
    *mb = (pt_microbatch){.batch = M * MBS, .tokens = tokens, .targets = tokens + 1};
}

/* A pipeline on the given transport. */
static int start(pt_pipeline_transport tr, pt_pipeline **p)
{
    pt_model_config mc = gpt_config();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = RANKS, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = "1f1b";
    pc.blas_threads = 1, pc.transport = tr;
    int bal[2] = {3, 3};
    pc.balance = bal, pc.n_balance = 2;
    return pt_pipeline_create(&mc, &oc, &pc, p);
}

static void *die_soon(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 3 * 1000 * 1000};
    nanosleep(&ts, NULL);
    _exit(3); /* as a crash would: no cleanup, no message */
}

/* Under mpirun: the training job. */
static int job(const char *mode, const char *ckpt)
{
    pt_pipeline *p;
    if (start(PT_PIPELINE_MPI, &p) != PT_OK) {
        fprintf(stderr, "create: %s\n", pt_last_error());
        return 1;
    }
    int me = pt_pipeline_rank(p);
    pt_model_config mc = gpt_config();
    int *tokens = malloc(sizeof(int) * (size_t)(M * MBS * mc.seq_len + 1));
    for (long s = 0; s < 1000; s++) {
        if (me == 1 && s == FAIL_AT) {
            if (!strcmp(mode, "hang")) {
                sleep(60);
                _exit(3);
            }
            pthread_t t;
            pthread_create(&t, NULL, die_soon, NULL);
        }
        pt_microbatch mb;
        make_batch(&mc, (int)s, tokens, &mb);
        int rc = pt_pipeline_train_step(p, &mb, s, LR, NULL);
        if (rc == PT_OK && s + 1 == SAVE_AFTER) {
            pt_train_state st = {.step = SAVE_AFTER};
            pt_rng_seed(&st.data_rng, 1);
            rc = pt_stage_checkpoint_save(p, ckpt, &st, NULL);
        }
        if (rc != PT_OK) {
            fprintf(stderr, "pipetrain: rank %d: %s\n", me, pt_last_error());
            fflush(stderr);
            return 1; /* a peer is gone: exit without finalizing */
        }
    }
    fprintf(stderr, "rank %d: the job ran to its end although rank 1 failed\n", me);
    return 0;
}

/* The job of test k: rank 1 fails as `mode` says; keep_going switches off
 * Open MPI's abort when a rank exits non-zero. */
static int launch(const char *mpiexec, char *flags, const char *mode, int keep_going,
                  const char *ckpt, char *out, size_t cap, double *took)
{
    char mode_env[64], ckpt_env[256], *env[5];
    int n = 0;
    snprintf(mode_env, sizeof mode_env, "PT_FAULT_MODE=%s", mode);
    env[n++] = mode_env;
    env[n++] = "PIPETRAIN_TIMEOUT=3";
    snprintf(ckpt_env, sizeof ckpt_env, "PT_FAULT_CKPT=%s", ckpt);
    env[n++] = ckpt_env;
    if (keep_going)
        env[n++] = "OMPI_MCA_orte_abort_on_non_zero_status=0";
    env[n] = NULL;
    return launch_self(mpiexec, flags, RANKS, (const char *const *)env, out, cap, took);
}

/* The checkpoint loads and holds what the threads pipeline has after
 * SAVE_AFTER steps, bit for bit. */
static int check_checkpoint(const char *ckpt)
{
    pt_model *ref, *m;
    pt_optimizer *ro, *o;
    pt_pipeline *p;
    if (start(PT_PIPELINE_THREADS, &p) != PT_OK) {
        fprintf(stderr, "FAIL: threads pipeline: %s\n", pt_last_error());
        return 1;
    }
    pt_model_config mc = gpt_config();
    int *tokens = malloc(sizeof(int) * (size_t)(M * MBS * mc.seq_len + 1));
    for (int s = 0; s < SAVE_AFTER; s++) {
        pt_microbatch mb;
        make_batch(&mc, s, tokens, &mb);
        if (pt_pipeline_train_step(p, &mb, s, LR, NULL) != PT_OK) {
            fprintf(stderr, "FAIL: threads step: %s\n", pt_last_error());
            return 1;
        }
    }
    free(tokens);
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    if (pt_model_create(&mc, &ref) || pt_optimizer_create(ref, &oc, &ro) ||
        pipeline_copy_out(p, ref, ro, NULL) != pt_model_n_params(ref)) {
        fprintf(stderr, "FAIL: reading the threads pipeline: %s\n", pt_last_error());
        return 1;
    }
    pt_pipeline_destroy(p);
    pt_train_state st;
    if (pt_model_create(&mc, &m) || pt_optimizer_create(m, &oc, &o) ||
        pt_checkpoint_load(ckpt, m, o, &st) != PT_OK) {
        fprintf(stderr, "FAIL: the checkpoint does not load: %s\n", pt_last_error());
        return 1;
    }
    int bad = st.step != SAVE_AFTER;
    for (int i = 0; !bad && i < pt_model_n_params(m); i++) {
        const pt_param *a = pt_model_param(m, i), *b = pt_model_param(ref, i);
        bad |= memcmp(a->data, b->data, a->numel * sizeof(float)) != 0;
        for (int w = 0; w < 2; w++)
            bad |= memcmp(pt_optimizer_state(o, m, i, w), pt_optimizer_state(ro, ref, i, w),
                          a->numel * sizeof(float)) != 0;
        if (bad)
            fprintf(stderr, "FAIL: the checkpoint's %s differs from the threads pipeline's\n",
                    a->name);
    }
    if (st.step != SAVE_AFTER)
        fprintf(stderr, "FAIL: the checkpoint says step %ld, not %d\n", st.step, SAVE_AFTER);
    pt_optimizer_destroy(o);
    pt_optimizer_destroy(ro);
    pt_model_destroy(m);
    pt_model_destroy(ref);
    return bad;
}

int main(void)
{
    if (getenv("PT_FAULT_MODE"))
        return job(getenv("PT_FAULT_MODE"), getenv("PT_FAULT_CKPT"));
    const char *mpiexec = getenv("PT_MPIEXEC");
    if (!mpiexec || !*mpiexec) {
        printf("test_mpi_pipeline_fault: PT_MPIEXEC not set; skipped\n");
        return 77;
    }
    const char *env_flags = getenv("PT_MPIEXEC_FLAGS");
    char dir[] = "/tmp/pt_pipeline_fault_XXXXXX";
    if (!mkdtemp(dir))
        return printf("FAIL: mkdtemp\n"), 1;
    char ckpt[128];
    snprintf(ckpt, sizeof ckpt, "%s/set", dir);
    char rm[160];
    snprintf(rm, sizeof rm, "rm -rf '%s'", ckpt);
    int failures = 0;
    static char out[1 << 16];
    static const char *modes[3] = {"exit", "hang", "exit"};
    for (int k = 0; k < 3; k++) {
        int keep_going = k == 2;
        if (system(rm) != 0)
            return printf("FAIL: %s\n", rm), 1;
        char flags[256];
        snprintf(flags, sizeof flags, "%s", env_flags ? env_flags : "");
        double took = 0.0;
        int status = launch(mpiexec, flags, modes[k], keep_going, ckpt, out, sizeof out, &took);
        printf("---- job %d (rank 1: %s) output ----\n%s---- exit status %d after %.1f s ----\n",
               k + 1, modes[k], out, status, took);
        if (status == 0 && !keep_going) {
            fprintf(stderr, "FAIL: job %d exited 0 although rank 1 failed\n", k + 1);
            failures++;
        }
        if (took >= 30.0) {
            fprintf(stderr, "FAIL: job %d took %.1f s to end; at most 30\n", k + 1, took);
            failures++;
        }
        int named = strstr(out, "rank 1 stopped answering") || strstr(out, "rank 1 failed");
        if (k == 0)
            named = named || strstr(out, ",1],1]");
        if (!named) {
            fprintf(stderr, "FAIL: nothing in job %d's output names rank 1\n", k + 1);
            failures++;
        }
        failures += check_checkpoint(ckpt);
    }
    if (system(rm) != 0)
        failures++;
    rmdir(dir);
    if (failures)
        return 1;
    printf("test_mpi_pipeline_fault: ok\n");
    return 0;
}
