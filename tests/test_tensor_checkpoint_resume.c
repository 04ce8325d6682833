/* test_tensor_checkpoint_resume: checkpoints of tensor-parallel stages keep
 * one logical layout, on threads. A GPT (tied embedding and head, clipping
 * that bites) is saved after 3 of 6 AdamW steps at (P, T, D) = (2, 2, 1):
 *   - the set lists the whole model's tensors with their whole shapes (a
 *     one-worker model reads it: pt_checkpoint_load checks every shape),
 *     and its weights and moments are those the slices held, gathered;
 *   - resumed at (1, 1, 2, zero 1), the layout, and at (1, 1, 1),
 *     (1, 4, 2, zero 2) and (2, 2, 1): the losses of steps 4 to 6 are
 *     within 1e-5 relative of the uninterrupted (2, 2, 1) run's, and at
 *     (2, 2, 1) itself bit for bit;
 * and a set saved at (1, 1, 1) resumes at (2, 2, 2, zero 1) likewise. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipetrain.h"

#include "check.h"
#include "tensor/rng.h"
#include "train/stage_checkpoint.h"

#define STEPS   6
#define SAVE_AT 3
#define M       4

typedef struct {
    int P, T, D, zero;
} layout;

static char dir[64];

static void cleanup(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

static pt_model_config gpt(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 4, c.n_embd = 32, c.seq_len = 16, c.vocab = 64, c.seed = 5;
    return c;
}

static pt_optim_config optim(void)
{
    pt_optim_config o = pt_optim_config_default(PT_OPTIM_ADAMW);
    o.grad_clip = 0.5f;
    return o;
}

static pt_pipeline *start(layout l)
{
    pt_model_config c = gpt();
    pt_optim_config o = optim();
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = l.P, pc.tensor = l.T, pc.replicas = l.D, pc.zero = l.zero, pc.microbatches = M;
    pc.transport = PT_PIPELINE_THREADS;
    pt_pipeline *p = NULL;
    if (pt_pipeline_create(&c, &o, &pc, &p) != PT_OK) {
        CHECK_REPORT("(%d, %d, %d, zero %d): %s", l.P, l.T, l.D, l.zero, pt_last_error());
        failures++;
    }
    return p;
}

/* Steps first..last-1 into losses[]. */
static int steps(pt_pipeline *p, int first, int last, float *losses)
{
    pt_model_config c = gpt();
    int tokens[M * 16 + 1];
    for (int s = first; s < last; s++) {
        pt_rng r;
        pt_rng_seed(&r, 700 + (uint64_t)s);
        for (int i = 0; i <= M * c.seq_len; i++)
            tokens[i] = (int)pt_rng_below(&r, (uint64_t)c.vocab);
        pt_microbatch b = {.batch = M, .tokens = tokens, .targets = tokens + 1};
        REQUIRE(pt_pipeline_train_step(p, &b, s, 3e-3f, &losses[s]) == PT_OK, "step %d: %s", s,
                pt_last_error());
    }
    return 0;
}

/* The uninterrupted run at l, and the set it saves at SAVE_AT. */
static int reference(layout l, const char *path, float *losses)
{
    pt_pipeline *p = start(l), *q = start(l);
    REQUIRE(p && q, "reference layout");
    int bad = steps(p, 0, STEPS, losses) || steps(q, 0, SAVE_AT, losses + STEPS);
    pt_train_state st = {.step = SAVE_AT};
    if (!bad)
        CHECK(pt_stage_checkpoint_save(q, path, &st, NULL) == PT_OK, "save at (%d, %d, %d): %s",
              l.P, l.T, l.D, pt_last_error());
    for (int s = 0; !bad && s < SAVE_AT; s++)
        CHECK(losses[s] == losses[STEPS + s], "two runs at (%d, %d, %d) differ", l.P, l.T, l.D);
    pt_pipeline_destroy(p);
    pt_pipeline_destroy(q);
    return bad;
}

static void resume(layout l, const char *path, const float *ref, bool exact)
{
    pt_pipeline *p = start(l);
    if (!p)
        return;
    pt_train_state st = {0};
    float losses[STEPS];
    if (pt_stage_checkpoint_load(p, path, &st, NULL) != PT_OK) {
        CHECK_REPORT("load at (%d, %d, %d, zero %d): %s", l.P, l.T, l.D, l.zero, pt_last_error());
        failures++;
    } else if (!steps(p, SAVE_AT, STEPS, losses)) {
        CHECK(st.step == SAVE_AT, "the set's step is %ld", st.step);
        double worst = 0;
        for (int s = SAVE_AT; s < STEPS; s++) {
            double d = fabs(losses[s] - ref[s]) / fabs(ref[s]);
            worst = d > worst ? d : worst;
            CHECK(d <= 1e-5 && (!exact || losses[s] == ref[s]),
                  "(%d, %d, %d, zero %d) step %d: loss %.9g, uninterrupted %.9g", l.P, l.T, l.D,
                  l.zero, s + 1, losses[s], ref[s]);
        }
        printf("resumed at (P %d, T %d, D %d, zero %d): worst relative difference %.2g%s\n", l.P,
               l.T, l.D, l.zero, worst, exact ? " (bit-identical asked)" : "");
    }
    pt_pipeline_destroy(p);
}

/* A one-worker model and optimizer read the set: every tensor is there at
 * its whole shape; the values the gathered slices held come back whole. */
static void read_whole(const char *path)
{
    pt_model_config c = gpt();
    pt_optim_config oc = optim();
    pt_model *m;
    pt_optimizer *o;
    if (pt_model_create(&c, &m) != PT_OK || pt_optimizer_create(m, &oc, &o) != PT_OK) {
        CHECK_REPORT("%s", pt_last_error());
        failures++;
        return;
    }
    pt_train_state st = {0};
    CHECK(pt_checkpoint_load(path, m, o, &st) == PT_OK, "a one-worker model reads the set: %s",
          pt_last_error());
    const pt_param *wte = pt_model_find_param(m, "transformer.wte.weight");
    if (!wte || !wte->data) {
        CHECK_REPORT("no transformer.wte.weight");
        failures++;
        return;
    }
    CHECK(wte->numel == (size_t)c.vocab * c.n_embd, "wte is not whole");
    int moved = 0;
    for (size_t k = 0; k < wte->numel; k++)
        moved += pt_optimizer_state(o, m, (int)(wte - pt_model_param(m, 0)), 1)[k] != 0.0f;
    CHECK(moved > 0, "wte's second moments read back all zero");
    pt_optimizer_destroy(o);
    pt_model_destroy(m);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/pt_tensor_resume_XXXXXX");
    REQUIRE(mkdtemp(dir), "cannot make a temporary folder");
    atexit(cleanup);
    char sliced[96], whole[96];
    snprintf(sliced, sizeof sliced, "%s/sliced", dir);
    snprintf(whole, sizeof whole, "%s/whole", dir);
    float ref[2 * STEPS], ref1[2 * STEPS];
    if (reference((layout){2, 2, 1, 0}, sliced, ref))
        return 1;
    read_whole(sliced);
    resume((layout){1, 1, 2, 1}, sliced, ref, false);
    resume((layout){1, 1, 1, 0}, sliced, ref, false);
    resume((layout){1, 4, 2, 2}, sliced, ref, false);
    resume((layout){2, 2, 1, 0}, sliced, ref, true);
    if (reference((layout){1, 1, 1, 0}, whole, ref1))
        return 1;
    resume((layout){2, 2, 2, 1}, whole, ref1, false);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
