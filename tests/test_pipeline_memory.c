/* test_pipeline_memory: the measured peak of live activation bytes per worker
 * behaves as the schedules promise.
 * - gpipe: every forward runs before any backward, so the peak grows with M;
 * - 1f1b: worker r holds at most P - r micro-batches, so the peak is the same
 *   for M = 4, 8 and 16 (P = 3), and worker 0 holds more than the last worker;
 * - activation checkpointing keeps only each chunk's input, so the peak drops
 *   under both schedules (except on 1f1b's last worker, which never holds
 *   more than the one micro-batch it is working on);
 * - the trace's counter tracks, read with a JSON parser, follow the store:
 *   each worker's activation bytes peak at its store's peak, and 1f1b
 *   worker w holds P - w micro-batches at most (without checkpointing); its
 *   transport bytes in flight rise by exactly what its sends carry and
 *   fall back to 0 by the end of the step;
 * - the memory report: what every worker allocated (parameters, gradients,
 *   moments, stashes, activations, buffers) equals, within 10% and kind by
 *   kind, what pt_schedule_predict_memory() predicts from the description,
 *   the schedule and the partition alone, for gpipe, 1f1b, interleaved, zbv
 *   and pipedream, with and without checkpointing and replicas; and the
 *   stages of a cut hold the whole model's parameters exactly once (plus
 *   the tied copy), with the panels their products keep of each matrix;
 * - under bf16 the prediction matches what is allocated (the parameters'
 *   bf16 copy included), and each worker's activations take at most 0.55x
 *   the bytes they take under fp32;
 * - the LM head's probabilities are held from F to the end of B only (one
 *   at a time on zbh1's last worker, all M under gpipe), and a record's
 *   backward part (the gradients the weight pass reads) from B to W only: one per chunk where every
 * backward is fused (gpipe, 1f1b, interleaved) whatever the micro-batches in flight, as many as
 *   split backwards leave waiting for their W under zbh1 and zbv; a
 *   transformer block's is a third of its record or more, and worker 0 of
 *   1f1b allocates accordingly less than P whole records. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/json.h"
#include "model/model.h"
#include "plan/memory.h"
#include "pipetrain.h"
#include "runtime/optimizer.h"
#include "tensor/rng.h"

#include "check.h"

#define P   3
#define MBS 2

/* The trace's counter tracks of the step just run, read with a JSON
 * parser: each worker's activation bytes peak where its store's peak is, and
 * under 1f1b without checkpointing worker w holds at most P - w
 * micro-batches, reached; each worker's transport bytes in flight start and
 * end at 0 and rise by exactly the bytes its sends carry (M boundary
 * tensors per direction it sends in); every counter's samples are in time
 * order. */
static int check_counters(const pt_pipeline *p, const char *schedule, int M, int ckpt,
                          size_t boundary, const size_t *peak)
{
    char path[64];
    snprintf(path, sizeof path, "/tmp/pt_counters_%d.json", (int)getpid());
    REQUIRE(pt_pipeline_write_trace(p, path) == PT_OK, "trace: %s", pt_last_error());
    FILE *f = fopen(path, "r");
    REQUIRE(f, "cannot read %s", path);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text, f);
    fclose(f);
    unlink(path);
    pt_json *doc;
    REQUIRE(n < sizeof text && pt_json_parse(text, n, 0, "trace", &doc) == PT_OK, "trace: %s",
            pt_last_error());
    const pt_json *events = pt_json_get(doc, "traceEvents");
    REQUIRE(events && events->type == PT_JSON_ARRAY, "the trace has no traceEvents array");
    size_t most[P] = {0}, flight_most[P] = {0}, flight_first[P], flight_last[P], sent[P] = {0};
    int mbs[P] = {0}, samples[P] = {0}, flights[P] = {0};
    double last_ts[2][P];
    for (int w = 0; w < P; w++)
        last_ts[0][w] = last_ts[1][w] = -1e300;
    for (size_t i = 0; i < events->n; i++) {
        const pt_json *e = events->items[i], *ph = pt_json_get(e, "ph");
        if (!ph || ph->type != PT_JSON_STRING || strcmp(ph->string, "C"))
            continue;
        const pt_json *name = pt_json_get(e, "name"), *ts = pt_json_get(e, "ts");
        const pt_json *args = pt_json_get(e, "args");
        int w = -1, len = 0;
        char what[16] = "";
        REQUIRE(name && name->type == PT_JSON_STRING && ts && ts->type == PT_JSON_NUMBER && args &&
                    sscanf(name->string, "worker %d %15s%n", &w, what, &len) == 2 &&
                    (size_t)len == name->len && w >= 0 && w < P,
                "%s: a counter event without a worker's name and a time", schedule);
        int transport = !strcmp(what, "transport");
        REQUIRE(transport || !strcmp(what, "activations"), "%s: a counter named '%s'", schedule,
                name->string);
        CHECK(ts->number >= last_ts[transport][w], "%s: %s goes back in time at %.3f", schedule,
              name->string, ts->number);
        last_ts[transport][w] = ts->number;
        if (transport) {
            const pt_json *b = pt_json_get(args, "bytes in flight");
            REQUIRE(b && b->is_uint, "%s: %s without its bytes in flight", schedule, name->string);
            size_t bytes = (size_t)b->uint_value;
            if (flights[w]++ == 0)
                flight_first[w] = bytes;
            else if (bytes > flight_last[w])
                sent[w] += bytes - flight_last[w];
            flight_last[w] = bytes;
            flight_most[w] = bytes > flight_most[w] ? bytes : flight_most[w];
            continue;
        }
        const pt_json *b = pt_json_get(args, "bytes"), *m = pt_json_get(args, "micro-batches");
        REQUIRE(b && b->is_uint && m && m->is_int, "%s: %s without bytes and micro-batches",
                schedule, name->string);
        most[w] = b->uint_value > most[w] ? (size_t)b->uint_value : most[w];
        mbs[w] = (int)m->int_value > mbs[w] ? (int)m->int_value : mbs[w];
        samples[w]++;
    }
    pt_json_free(doc);
    for (int w = 0; w < P; w++) {
        REQUIRE(samples[w] > 0 && flights[w] > 0, "%s worker %d: no counter events in the trace",
                schedule, w);
        CHECK(most[w] == peak[w], "%s worker %d: the counter peaks at %zu bytes, the store at %zu",
              schedule, w, most[w], peak[w]);
        CHECK(strcmp(schedule, "1f1b") || ckpt || mbs[w] == P - w,
              "1f1b worker %d: %d micro-batches in flight at most, expected %d", w, mbs[w], P - w);
        /* the first and last workers send one way, the others both */
        size_t want = (size_t)M * boundary * (w == 0 || w == P - 1 ? 1 : 2);
        CHECK(flight_first[w] == 0 && flight_last[w] == 0 && sent[w] == want &&
                  flight_most[w] >= boundary && flight_most[w] <= want,
              "%s worker %d: transport bytes in flight from %zu to %zu, peak %zu, %zu sent in "
              "all; expected from 0 to 0 and %zu sent",
              schedule, w, flight_first[w], flight_last[w], flight_most[w], sent[w], want);
    }
    printf("%-6s M=%-2d checkpoint %d: transport bytes in flight at most %zu %zu %zu\n", schedule,
           M, ckpt, flight_most[0], flight_most[1], flight_most[2]);
    return 0;
}

/* Peak bytes per worker after one step of `schedule` with M micro-batches. */
static int peaks(const char *schedule, int M, int ckpt, size_t *peak)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 4, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    int balance[P] = {2, 2, 2};
    pc.stages = P, pc.microbatches = M, pc.micro_batch_size = MBS, pc.schedule = schedule;
    pc.balance = balance, pc.n_balance = P, pc.checkpoint_activations = ckpt;
    pc.blas_threads = 1;
    pt_pipeline *p;
    if (pt_pipeline_create(&c, &oc, &pc, &p))
        return printf("pipeline: %s\n", pt_last_error()), 1;
    int rows = M * MBS * c.seq_len;
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    pt_rng r;
    pt_rng_seed(&r, 3);
    for (int i = 0; i <= rows; i++)
        tok[i] = (int)pt_rng_below(&r, (uint64_t)c.vocab);
    pt_microbatch b = {.batch = M * MBS, .tokens = tok, .targets = tok + 1};
    float loss;
    int rc = pt_pipeline_train_step(p, &b, 0, 1e-3f, &loss);
    if (rc != PT_OK)
        printf("train_step: %s\n", pt_last_error());
    for (int w = 0; w < P; w++)
        peak[w] = pt_pipeline_peak_activation_bytes(p, w);
    size_t boundary = (size_t)MBS * (size_t)c.seq_len * (size_t)c.n_embd * sizeof(float);
    if (rc == PT_OK && check_counters(p, schedule, M, ckpt, boundary, peak))
        rc = PT_EINVAL;
    printf("%-6s M=%-2d checkpoint %d: peak bytes per worker %zu %zu %zu\n", schedule, M, ckpt,
           peak[0], peak[1], peak[2]);
    free(tok);
    pt_pipeline_destroy(p);
    return rc != PT_OK;
}

/* The precision memory_matches runs in, and the activation bytes (records
 * and boundary buffers) each of its workers allocated. */
static pt_precision precision = PT_PRECISION_FP32;
/* Blocks per chunk, or none (NULL: profiled and chosen, which can differ
 * between two pipelines on a busy machine). */
static const int *balance;
static int n_balance;
static size_t activations[16];

/* Measured against predicted memory for one configuration. */
static int memory_matches(const char *schedule, int stages, int D, int v, int M, int ckpt)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 6, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    c.precision = precision;
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = stages, pc.replicas = D, pc.microbatches = M, pc.micro_batch_size = MBS;
    pc.schedule = schedule, pc.virtual_stages = v, pc.checkpoint_activations = ckpt;
    pc.blas_threads = 1, pc.transport = PT_PIPELINE_THREADS;
    pc.balance = balance, pc.n_balance = n_balance;
    pt_pipeline *p;
    REQUIRE(pt_pipeline_create(&c, &oc, &pc, &p) == PT_OK, "%s: %s", schedule, pt_last_error());
    int rows = M * MBS * c.seq_len, W = pt_pipeline_workers(p), K = pt_pipeline_chunks(p);
    int *tok = malloc(sizeof(int) * (size_t)(rows + 1));
    for (int i = 0; i <= rows; i++)
        tok[i] = (i * 7) % c.vocab;
    pt_microbatch b = {.batch = M * MBS, .tokens = tok, .targets = tok + 1};
    REQUIRE(pt_pipeline_train_step(p, &b, 0, 1e-3f, NULL) == PT_OK &&
                pt_pipeline_train_step(p, &b, 1, 1e-3f, NULL) == PT_OK,
            "%s: %s", schedule, pt_last_error());
    pt_memory_use got[16], want[16], planned[16];
    size_t rss[16];
    REQUIRE(W <= 16 && pt_pipeline_memory(p, got, want, rss) == PT_OK, "memory: %s",
            pt_last_error());
    /* the same from the schedule and the partition alone */
    int balance[16];
    for (int ch = 0; ch < K; ch++) {
        int first, last;
        pt_pipeline_chunk_blocks(p, ch, &first, &last);
        balance[ch] = last - first + 1;
    }
    int replicated = D > 1 && strcmp(schedule, "pipedream") && strcmp(schedule, "1f1b-rr");
    /* the pipeline's schedule: a zero-bubble order is built for the profiled times */
    if (!replicated)
        REQUIRE(pt_schedule_predict_memory(pt_pipeline_schedule(p), pt_pipeline_description(p),
                                           balance, MBS, ckpt, 2, planned) == PT_OK,
                "predict: %s", pt_last_error());
    size_t params = 0, whole = 0;
    const pt_model *desc = pt_pipeline_description(p);
    whole = pt_model_param_bytes(desc, 0, pt_model_n_blocks(desc) - 1);
    for (int w = 0; w < W; w++) {
        const size_t g[6] = {got[w].params, got[w].grads,       got[w].moments,
                             got[w].stash,  got[w].activations, got[w].comm};
        const size_t e[6] = {want[w].params, want[w].grads,       want[w].moments,
                             want[w].stash,  want[w].activations, want[w].comm};
        for (int k = 0; k < 6; k++)
            CHECK(g[k] == e[k], "%s D=%d ckpt=%d worker %d kind %d: allocated %zu, predicted %zu",
                  schedule, D, ckpt, w, k, g[k], e[k]);
        CHECK(replicated || pt_memory_total(&planned[w]) == pt_memory_total(&want[w]),
              "%s worker %d: the schedule's prediction %zu differs from the pipeline's %zu",
              schedule, w, pt_memory_total(&planned[w]), pt_memory_total(&want[w]));
        activations[w] = got[w].activations;
        int replica;
        pt_pipeline_worker_stage(p, w, &replica);
        params += replica == 0 ? got[w].params : 0;
    }
    size_t tied = (size_t)c.vocab * (size_t)c.n_embd * sizeof(float);
    if (precision == PT_PRECISION_BF16) /* and the products' bf16 copy */
        whole += whole / 2, tied += tied / 2;
    /* and the panels the products keep of each matrix (fp32, own products) */
    whole += pt_model_panel_bytes(desc, 0, pt_model_n_blocks(desc) - 1);
    CHECK(params == whole || params == whole - tied,
          "%s: the stages hold %zu parameter bytes, the whole model %zu", schedule, params, whole);
    printf("%-11s %s P=%d D=%d v=%d M=%-2d ckpt %d: worker 0 allocated %zu bytes, predicted %zu\n",
           schedule, pt_precision_name(precision), stages, D, v, M, ckpt, pt_memory_total(&got[0]),
           pt_memory_total(&want[0]));
    free(tok);
    pt_pipeline_destroy(p);
    return 0;
}

/* Forward records and backward parts worker w's pool reserves for its
 * first own chunk under `name` (P stages, M micro-batches) */
static int record_counts(const char *name, int stages, int M, int w, int *fwd, int *bwd, int *outs)
{
    pt_schedule *s;
    REQUIRE(pt_schedule_generate(name, stages, M, 0, &s) == PT_OK, "%s: %s", name, pt_last_error());
    int K = pt_schedule_chunks(s), records[64] = {0}, grads[64] = {0}, outputs[64] = {0}, c = 0;
    REQUIRE(K <= 64, "%s: %d chunks", name, K);
    pt_plan_worker_records(s, w, false, records);
    pt_plan_worker_grad_records(s, w, grads);
    pt_plan_worker_outputs(s, w, false, outputs);
    while (c < K && !records[c])
        c++;
    *fwd = records[c], *bwd = grads[c], *outs = outputs[c];
    pt_schedule_destroy(s);
    return 0;
}

/* The backward parts a worker holds, and what that saves. */
static int backward_parts(void)
{
    int fwd, bwd, outs;
    for (int M = 4; M <= 16; M *= 2) {
        REQUIRE(!record_counts("gpipe", 3, M, 0, &fwd, &bwd, &outs), "gpipe");
        CHECK(fwd == M && bwd == 1, "gpipe M=%d worker 0: %d records, %d backward parts", M, fwd,
              bwd);
        REQUIRE(!record_counts("1f1b", 3, M, 0, &fwd, &bwd, &outs), "1f1b");
        CHECK(fwd == 3 && bwd == 1, "1f1b M=%d worker 0: %d records, %d backward parts", M, fwd,
              bwd);
        REQUIRE(!record_counts("interleaved", 2, M, 0, &fwd, &bwd, &outs), "interleaved");
        CHECK(bwd == 1 && fwd > 1, "interleaved M=%d worker 0: %d records, %d backward parts", M,
              fwd, bwd);
        /* split backwards: the W waits, with its gradients, behind later work */
        REQUIRE(!record_counts("zbh1", 3, M, 2, &fwd, &bwd, &outs), "zbh1");
        CHECK(bwd > 1 && bwd <= fwd, "zbh1 M=%d worker 2: %d records, %d backward parts", M, fwd,
              bwd);
        /* the last worker's outputs (the LM head's) live from F to B: its B
         * follows its F, where the W waits */
        CHECK(outs == 1 && fwd > 1, "zbh1 M=%d worker 2: %d records, %d outputs", M, fwd, outs);
        REQUIRE(!record_counts("gpipe", 3, M, 2, &fwd, &bwd, &outs), "gpipe");
        CHECK(outs == M, "gpipe M=%d worker 2: %d outputs", M, outs);
    }
    /* the bytes: GPT's transformer keeps its gradients apart, and 1f1b's
     * first worker allocates P forward parts and one backward part */
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 6, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    pt_model *m;
    REQUIRE(pt_model_create(&c, &m) == PT_OK, "model: %s", pt_last_error());
    size_t f = pt_model_forward_record_bytes(m, 1, 2, MBS),
           g = pt_model_grad_record_bytes(m, 1, 2, MBS);
    CHECK(3 * g >= f + g && pt_model_activation_bytes(m, 1, 2, MBS) == f + g,
          "two transformer blocks: forward part %zu bytes, backward part %zu", f, g);
    pt_activations *a;
    REQUIRE(pt_activations_create(m, 1, 2, MBS, &a) == PT_OK, "record: %s", pt_last_error());
    CHECK(pt_activations_bytes(a) == f + g, "a whole record takes %zu bytes, not %zu",
          pt_activations_bytes(a), f + g);
    pt_activations_destroy(a);
    /* a backward needs the backward part, and the one for its range */
    pt_grad_record *other;
    REQUIRE(pt_activations_create_forward(m, 1, 2, MBS, &a) == PT_OK &&
                pt_grad_record_create(m, 1, 3, MBS, &other) == PT_OK,
            "records: %s", pt_last_error());
    float *dy = calloc((size_t)MBS * 8 * 16 * 2, sizeof(float)), *dx = dy + MBS * 8 * 16;
    pt_microbatch mb = {.batch = MBS};
    CHECK(pt_model_backward_input(m, 1, 2, &mb, dx, a, dy, dx, 1.0f) == PT_EINVAL &&
              strstr(pt_last_error(), "without its gradient record"),
          "a backward without a backward part: %s", pt_last_error());
    pt_activations_attach_grads(a, other);
    CHECK(pt_model_backward_weight(m, 1, 2, &mb, dx, a) == PT_EINVAL &&
              strstr(pt_last_error(), "attached to activations for blocks 1..2"),
          "a backward part of blocks 1..3 on blocks 1..2: %s", pt_last_error());
    CHECK(pt_activations_detach_grads(a) == other, "detach returns the attached part");
    pt_grad_record_destroy(other);
    pt_activations_destroy(a);
    free(dy);
    size_t whole = pt_model_activation_bytes(m, 0, 2, MBS); /* worker 0's chunk below */
    pt_model_destroy(m);
    static const int cut[] = {3, 2, 3}; /* embedding + 2 blocks, 2 blocks, 2 blocks + head */
    balance = cut, n_balance = 3;
    REQUIRE(memory_matches("1f1b", 3, 1, 0, 8, 0) == 0, "1f1b");
    balance = NULL, n_balance = 0;
    printf("1f1b worker 0: activations %zu bytes, 3 whole records %zu; a transformer block's "
           "backward part %zu bytes, its forward part %zu\n",
           activations[0], 3 * whole, g / 2, f / 2);
    CHECK(activations[0] < 3 * whole,
          "1f1b worker 0 allocated %zu bytes of activations, 3 whole "
          "records (with their boundary buffers besides) %zu",
          activations[0], 3 * whole);
    return 0;
}

int main(void)
{
    const struct {
        const char *name;
        int stages, D, v, M;
    } cases[] = {{"gpipe", 3, 1, 0, 8}, {"1f1b", 3, 1, 0, 8},   {"interleaved", 2, 1, 2, 4},
                 {"zbv", 2, 1, 2, 4},   {"zbh1", 3, 1, 0, 6},   {"pipedream", 3, 1, 0, 8},
                 {"1f1b", 2, 2, 0, 8},  {"1f1b-rr", 2, 2, 0, 8}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int ckpt = 0; ckpt < 2; ckpt++)
            REQUIRE(memory_matches(cases[i].name, cases[i].stages, cases[i].D, cases[i].v,
                                   cases[i].M, ckpt) == 0,
                    "memory of %s", cases[i].name);
    /* bf16: the prediction still matches, and every worker's activations
     * (records and boundary buffers) take at most 0.55 of fp32's, on the
     * same partition. The loss head keeps its logits and probabilities in
     * float: on this small model a last stage of one transformer block and
     * the head keeps 0.56x, so the last stage here holds two blocks. */
    const char *halved[] = {"1f1b", "gpipe", "zbh1"};
    static const int cuts[] = {2, 3, 3};
    balance = cuts, n_balance = 3;
    for (int i = 0; i < 3; i++)
        for (int ckpt = 0; ckpt < 2; ckpt++) {
            size_t fp32[16];
            precision = PT_PRECISION_FP32;
            REQUIRE(memory_matches(halved[i], 3, 1, 0, 6, ckpt) == 0, "fp32 %s", halved[i]);
            memcpy(fp32, activations, sizeof fp32);
            precision = PT_PRECISION_BF16;
            REQUIRE(memory_matches(halved[i], 3, 1, 0, 6, ckpt) == 0, "bf16 %s", halved[i]);
            for (int w = 0; w < 3; w++)
                REQUIRE(activations[w] <= 0.55 * (double)fp32[w],
                        "bf16 %s worker %d: activations %zu bytes, fp32 %zu (more than 0.55x)",
                        halved[i], w, activations[w], fp32[w]);
        }
    precision = PT_PRECISION_FP32;
    balance = NULL, n_balance = 0;
    REQUIRE(backward_parts() == 0, "backward parts");
    size_t g4[P], g8[P], g16[P], f4[P], f8[P], f16[P], gc8[P], fc8[P];
    REQUIRE(!peaks("gpipe", 4, 0, g4) && !peaks("gpipe", 8, 0, g8) && !peaks("gpipe", 16, 0, g16),
            "gpipe runs");
    REQUIRE(!peaks("1f1b", 4, 0, f4) && !peaks("1f1b", 8, 0, f8) && !peaks("1f1b", 16, 0, f16),
            "1f1b runs");
    REQUIRE(!peaks("gpipe", 8, 1, gc8) && !peaks("1f1b", 8, 1, fc8), "checkpointed runs");
    for (int w = 0; w < P; w++) {
        REQUIRE(g4[w] < g8[w] && g8[w] < g16[w],
                "gpipe worker %d: peak does not grow with M (%zu, %zu, %zu)", w, g4[w], g8[w],
                g16[w]);
        REQUIRE(g16[w] > 3 * g4[w], "gpipe worker %d: M x 4 grew the peak only from %zu to %zu", w,
                g4[w], g16[w]);
        REQUIRE(f4[w] == f8[w] && f8[w] == f16[w],
                "1f1b worker %d: peak changes with M (%zu, %zu, %zu)", w, f4[w], f8[w], f16[w]);
        REQUIRE(f16[w] < g16[w], "worker %d: 1f1b peak %zu not below gpipe's %zu", w, f16[w],
                g16[w]);
        /* the last 1f1b worker holds one micro-batch at a time: nothing to save */
        REQUIRE(gc8[w] < g8[w] && (w == P - 1 ? fc8[w] <= f8[w] : fc8[w] < f8[w]),
                "worker %d: checkpointing did not lower the peak (gpipe %zu -> %zu, 1f1b %zu -> "
                "%zu)",
                w, g8[w], gc8[w], f8[w], fc8[w]);
    }
    REQUIRE(f8[0] > f8[P - 1], "1f1b: worker 0 (%zu) should hold more than the last (%zu)", f8[0],
            f8[P - 1]);
    REQUIRE(gc8[0] * 2 < g8[0], "gpipe worker 0: checkpointing saved too little (%zu -> %zu)",
            g8[0], gc8[0]);
    if (failures)
        return 1;
    printf("ok\n");
    return 0;
}
