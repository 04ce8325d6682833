/* test_program_lowering: every schedule generator, over P = 1..6 stages,
 * M = 1..16 micro-batches, v = 1..3 chunks per worker and 1..2 replicas
 * wherever the schedule takes them, lowers (with the first and last chunk
 * tied, as GPT ties them) to a program that the validator accepts and that
 * holds, counted here without the validator:
 *   - the schedule's compute actions, in the schedule's order;
 *   - every send paired with exactly one receive on its peer (same
 *     micro-batch and direction, neighbouring chunk, each naming the other)
 *     and no transfer between chunks on one worker;
 *   - synchronous with replicas: one REDUCE per chunk a worker holds, right
 *     after its last backward piece (only sends between);
 *   - synchronous: one TIED per tied pair on each holder, then NORM and STEP
 *     once per worker, last;
 *   - pipedream: a STEP(chunk) after every backward carrying an update, with
 *     a REDUCE before it when replicated, and no NORM; pipedream whose
 *     replicas cannot pair their updates (M not a multiple of R) is refused;
 *   - forward-only: forwards and their activations' transfers alone;
 *   - zero 2 (1f1b-rr, 2 replicas, 1 to 3 weight pieces per chunk): after every W or BW, past its
 * sends, one SCATTER per piece in order, no REDUCE, a GATHER per held chunk after STEP; the program
 * validates, simulates, and reads back from its text. And the validator refuses the lowered program
 * of small schedules with any one non-compute action dropped (zero 2's too), and a SCATTER moved
 * before its weight pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/program.h"
#include "sched/schedule.h"

#include "check.h"

static int count_kind(const pt_program *p, int w, pt_prog_kind kind)
{
    int n = 0;
    for (int i = 0; i < p->n_actions[w]; i++)
        n += p->actions[w][i].kind == kind;
    return n;
}

static void check_compute_order(const pt_schedule *s, const pt_program *p, bool fwd,
                                const char *what)
{
    for (int w = 0; w < s->n_workers; w++) {
        int j = 0;
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (!pt_prog_is_compute(a->kind))
                continue;
            while (j < s->n_actions[w] && fwd && s->actions[w][j].kind != PT_ACT_F)
                j++;
            const pt_action *b = j < s->n_actions[w] ? &s->actions[w][j] : NULL;
            CHECK(b && (int)b->kind == (int)a->kind && b->chunk == a->chunk && b->mb == a->mb,
                  "%s: worker %d: compute action %d differs from the schedule's", what, w, i);
            j++;
        }
        while (j < s->n_actions[w] && fwd && s->actions[w][j].kind != PT_ACT_F)
            j++;
        CHECK(j == s->n_actions[w], "%s: worker %d: %d of %d compute actions", what, w, j,
              s->n_actions[w]);
    }
}

/* Each send finds one receive that names it, and the other way round. */
static void check_pairs(const pt_program *p, const char *what)
{
    int sends = 0, recvs = 0;
    for (int u = 0; u < p->shape->n_workers; u++)
        for (int i = 0; i < p->n_actions[u]; i++) {
            const pt_prog_action *a = &p->actions[u][i];
            recvs += pt_prog_is_recv(a->kind);
            if (!pt_prog_is_send(a->kind))
                continue;
            sends++;
            bool act = a->kind == PT_PROG_SEND_ACT;
            int c = act ? a->chunk + 1 : a->chunk - 1, v = a->peer, found = 0;
            CHECK(v != u && v == pt_sched_worker_of(p->shape, c, a->mb),
                  "%s: worker %d sends chunk %d mb %d to %d, not to chunk %d's holder", what, u,
                  a->chunk, a->mb, v, c);
            for (int j = 0; v >= 0 && v < p->shape->n_workers && j < p->n_actions[v]; j++) {
                const pt_prog_action *r = &p->actions[v][j];
                found += r->kind == (act ? PT_PROG_RECV_ACT : PT_PROG_RECV_GRAD) && r->chunk == c &&
                         r->mb == a->mb && r->peer == u;
            }
            CHECK(found == 1, "%s: worker %d's send of chunk %d mb %d has %d receives", what, u,
                  a->chunk, a->mb, found);
        }
    CHECK(sends == recvs, "%s: %d sends, %d receives", what, sends, recvs);
}

/* Synchronous replicas: REDUCE(c) once, right after c's last backward. */
static void check_reduce(const pt_program *p, const char *what)
{
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int c = 0; c < p->shape->n_chunks; c++) {
            int n = 0, at = -1, last = -1;
            for (int i = 0; i < p->n_actions[w]; i++) {
                const pt_prog_action *a = &p->actions[w][i];
                if (a->kind == PT_PROG_REDUCE && a->chunk == c)
                    n++, at = i;
                if ((a->kind == PT_PROG_W || a->kind == PT_PROG_BW) && a->chunk == c)
                    last = i;
            }
            if (!pt_sched_holds(p->shape, w, c, NULL)) {
                CHECK(n == 0, "%s: worker %d reduces chunk %d it does not hold", what, w, c);
                continue;
            }
            CHECK(n == 1, "%s: worker %d reduces chunk %d %d times", what, w, c, n);
            for (int i = last + 1; last >= 0 && i < at; i++)
                CHECK(pt_prog_is_send(p->actions[w][i].kind),
                      "%s: worker %d: action %d between chunk %d's last backward and its REDUCE",
                      what, w, i, c);
            CHECK(last < at, "%s: worker %d: REDUCE %d before the last backward", what, w, c);
        }
}

static void check_step_end(const pt_program *p, int tied_a, int tied_b, const char *what)
{
    for (int w = 0; w < p->shape->n_workers; w++) {
        int n = p->n_actions[w];
        CHECK(count_kind(p, w, PT_PROG_NORM) == 1 && count_kind(p, w, PT_PROG_STEP) == 1,
              "%s: worker %d: NORM and STEP not once", what, w);
        CHECK(n >= 2 && p->actions[w][n - 2].kind == PT_PROG_NORM &&
                  p->actions[w][n - 1].kind == PT_PROG_STEP && p->actions[w][n - 1].chunk < 0,
              "%s: worker %d does not end with N S", what, w);
        bool holder = tied_a >= 0 && (pt_sched_holds(p->shape, w, tied_a, NULL) ||
                                      pt_sched_holds(p->shape, w, tied_b, NULL));
        CHECK(count_kind(p, w, PT_PROG_TIED) == holder, "%s: worker %d: %d TIED, holder %d", what,
              w, count_kind(p, w, PT_PROG_TIED), holder);
    }
}

/* pipedream: [SB] [R c] S c after every updating backward; no NORM. */
static void check_async_steps(const pt_program *p, const char *what)
{
    for (int w = 0; w < p->shape->n_workers; w++) {
        int updates = 0;
        CHECK(count_kind(p, w, PT_PROG_NORM) == 0, "%s: worker %d: async NORM", what, w);
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (!pt_prog_is_compute(a->kind) || !a->update)
                continue;
            updates++;
            int j = i + 1;
            while (j < p->n_actions[w] && pt_prog_is_send(p->actions[w][j].kind))
                j++;
            if (p->shape->replicas > 1) {
                CHECK(j < p->n_actions[w] && p->actions[w][j].kind == PT_PROG_REDUCE &&
                          p->actions[w][j].chunk == a->chunk,
                      "%s: worker %d: no REDUCE after update %d", what, w, i);
                j++;
            }
            CHECK(j < p->n_actions[w] && p->actions[w][j].kind == PT_PROG_STEP &&
                      p->actions[w][j].chunk == a->chunk,
                  "%s: worker %d: no STEP after update %d", what, w, i);
        }
        CHECK(count_kind(p, w, PT_PROG_STEP) == updates, "%s: worker %d: %d steps, %d updates",
              what, w, count_kind(p, w, PT_PROG_STEP), updates);
    }
}

static void check_forward_only(const pt_schedule *s, const char *what)
{
    pt_lower_options o = pt_lower_options_default();
    o.forward_only = 1;
    pt_program *p = NULL;
    int rc = pt_program_lower(s, &o, &p);
    CHECK(rc == PT_OK, "%s: forward-only lowering -> %d (%s)", what, rc, pt_last_error());
    if (rc != PT_OK)
        return;
    rc = pt_program_validate(p);
    CHECK(rc == PT_OK, "%s: forward-only program refused: %s", what, pt_last_error());
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            pt_prog_kind k = p->actions[w][i].kind;
            CHECK(k == PT_PROG_F || k == PT_PROG_SEND_ACT || k == PT_PROG_RECV_ACT,
                  "%s: forward-only worker %d has kind %d", what, w, (int)k);
        }
    check_compute_order(s, p, true, what);
    check_pairs(p, what);
    pt_program_destroy(p);
}

static int checked;

static void check_one(const char *name, int P, int M, int v, int R)
{
    char what[96];
    snprintf(what, sizeof what, "%s P=%d M=%d v=%d R=%d", name, P, M, v, R);
    pt_schedule_config cfg = {
        .name = name, .stages = P, .microbatches = M, .virtual_stages = v, .replicas = R};
    pt_schedule *s = NULL;
    if (pt_schedule_create(&cfg, &s) != PT_OK) {
        CHECK(0, "%s: generate: %s", what, pt_last_error());
        return;
    }
    int C = s->n_chunks;
    int tied[2] = {0, C - 1};
    pt_lower_options o = pt_lower_options_default();
    o.tied = tied;
    o.n_tied = C > 1;
    pt_program *p = NULL;
    bool async = pt_sched_is_async(s);
    int rc = pt_program_lower(s, &o, &p);
    checked++;
    if (async && R > 1 && M % R) {
        CHECK(rc == PT_EINVAL && !p && strstr(pt_last_error(), "pair up"),
              "%s: unpaired asynchronous replicas lowered (%d)", what, rc);
        pt_schedule_destroy(s);
        return;
    }
    CHECK(rc == PT_OK, "%s: lower -> %d (%s)", what, rc, pt_last_error());
    if (rc == PT_OK) {
        rc = pt_program_validate(p);
        CHECK(rc == PT_OK, "%s: program refused: %s", what, pt_last_error());
        check_compute_order(s, p, false, what);
        check_pairs(p, what);
        if (async) {
            check_async_steps(p, what);
        } else {
            if (R > 1)
                check_reduce(p, what);
            check_step_end(p, C > 1 ? 0 : -1, C - 1, what);
        }
    }
    check_forward_only(s, what);
    pt_program_destroy(p);
    pt_schedule_destroy(s);
}

/* zero 2: the SCATTERs of every weight pass, in order, right after it. */
static void check_scatters(const pt_program *p, int pieces, const char *what)
{
    for (int w = 0; w < p->shape->n_workers; w++) {
        CHECK(count_kind(p, w, PT_PROG_REDUCE) == 0, "%s: worker %d has a REDUCE", what, w);
        for (int i = 0; i < p->n_actions[w]; i++) {
            const pt_prog_action *a = &p->actions[w][i];
            if (a->kind != PT_PROG_W && a->kind != PT_PROG_BW)
                continue;
            int j = i + 1;
            while (j < p->n_actions[w] && pt_prog_is_send(p->actions[w][j].kind))
                j++;
            for (int k = 0; k < pieces; k++, j++) {
                const pt_prog_action *x = j < p->n_actions[w] ? &p->actions[w][j] : NULL;
                CHECK(x && x->kind == PT_PROG_SCATTER && x->chunk == a->chunk && x->mb == a->mb &&
                          x->peer == k,
                      "%s: worker %d: SCATTER %d of the weight pass at %d is not at %d", what, w, k,
                      i, j);
            }
        }
        int held = 0;
        for (int c = 0; c < p->shape->n_chunks; c++)
            held += pt_sched_holds(p->shape, w, c, NULL);
        CHECK(count_kind(p, w, PT_PROG_GATHER) == held, "%s: worker %d: %d GATHERs, %d chunks",
              what, w, count_kind(p, w, PT_PROG_GATHER), held);
    }
}

static pt_lower_options zero2_options(const pt_schedule *s, int *tied, int *pieces, int n)
{
    pt_lower_options o = pt_lower_options_default();
    tied[0] = 0, tied[1] = s->n_chunks - 1;
    o.tied = tied, o.n_tied = s->n_chunks > 1;
    for (int c = 0; c < s->n_chunks && c < 64; c++)
        pieces[c] = n;
    o.zero = 2, o.weight_pieces = pieces;
    return o;
}

static void check_zero2(const char *name, int P, int M, int v, int R, int n)
{
    char what[96];
    snprintf(what, sizeof what, "zero 2 %s P=%d M=%d v=%d R=%d pieces %d", name, P, M, v, R, n);
    pt_schedule_config cfg = {
        .name = name, .stages = P, .microbatches = M, .virtual_stages = v, .replicas = R};
    pt_schedule *s = NULL;
    pt_program *p = NULL, *back = NULL;
    pt_schedule_sim *sim = NULL;
    char *text = NULL;
    int tied[2], pieces[64];
    if (pt_schedule_create(&cfg, &s) != PT_OK) {
        CHECK(0, "%s: generate: %s", what, pt_last_error());
        return;
    }
    pt_lower_options o = zero2_options(s, tied, pieces, n);
    int rc = pt_program_lower(s, &o, &p);
    CHECK(rc == PT_OK, "%s: lower: %s", what, pt_last_error());
    if (rc == PT_OK) {
        CHECK(pt_program_validate(p) == PT_OK, "%s: refused: %s", what, pt_last_error());
        check_scatters(p, n, what);
        CHECK(pt_program_simulate(p, NULL, &sim) == PT_OK, "%s: simulate: %s", what,
              pt_last_error());
        CHECK(pt_program_format(p, &text) == PT_OK && pt_program_parse(text, &back) == PT_OK &&
                  pt_prog_equal(p, back),
              "%s: the text does not read back: %s", what, pt_last_error());
    }
    checked++;
    free(text);
    pt_schedule_sim_destroy(sim);
    pt_program_destroy(back);
    pt_program_destroy(p);
    pt_schedule_destroy(s);
}

/* Dropping any one non-compute action must be refused (zero: at zero 2
 * with 2 weight pieces per chunk). */
static void check_drops(const char *name, int P, int M, int v, int R, int zero)
{
    pt_schedule_config cfg = {
        .name = name, .stages = P, .microbatches = M, .virtual_stages = v, .replicas = R};
    pt_schedule *s = NULL;
    pt_program *p = NULL;
    int tied[2] = {0, 1}, pieces[64];
    pt_lower_options o = pt_lower_options_default();
    o.tied = tied;
    o.n_tied = 1;
    if (zero && pt_schedule_create(&cfg, &s) == PT_OK) {
        o = zero2_options(s, tied, pieces, 2);
        pt_schedule_destroy(s);
        s = NULL;
    }
    if (pt_schedule_create(&cfg, &s) != PT_OK || pt_program_lower(s, &o, &p) != PT_OK) {
        CHECK(0, "%s: %s", name, pt_last_error());
        pt_schedule_destroy(s);
        return;
    }
    int tried = 0, refused = 0;
    for (int w = 0; w < p->shape->n_workers; w++)
        for (int i = 0; i < p->n_actions[w]; i++) {
            pt_prog_action saved = p->actions[w][i];
            if (pt_prog_is_compute(saved.kind))
                continue;
            int n = p->n_actions[w];
            memmove(&p->actions[w][i], &p->actions[w][i + 1], (size_t)(n - i - 1) * sizeof saved);
            p->n_actions[w] = n - 1;
            tried++;
            refused += pt_program_validate(p) != PT_OK;
            memmove(&p->actions[w][i + 1], &p->actions[w][i], (size_t)(n - i - 1) * sizeof saved);
            p->actions[w][i] = saved;
            p->n_actions[w] = n;
        }
    CHECK(tried > 0 && refused == tried, "%s: %d of %d programs missing an action refused", name,
          refused, tried);
    CHECK(pt_program_validate(p) == PT_OK, "%s: restored program refused", name);
    for (int i = 0; zero && i < p->n_actions[0]; i++) /* a SCATTER before its weight pass */
        if (p->actions[0][i].kind == PT_PROG_SCATTER) {
            pt_prog_action x = p->actions[0][i], before = p->actions[0][i - 1];
            p->actions[0][i - 1] = x, p->actions[0][i] = before;
            CHECK(pt_program_validate(p) != PT_OK && strstr(pt_last_error(), "weight pass"),
                  "%s: a SCATTER before its weight pass accepted: %s", name, pt_last_error());
            break;
        }
    pt_program_destroy(p);
    pt_schedule_destroy(s);
}

int main(void)
{
    for (int P = 1; P <= 6; P++)
        for (int M = 1; M <= 16; M++) {
            const char *flat[] = {"gpipe", "1f1b", "zbh1", "zbh2", "zb1p", "zb2p"};
            for (int i = 0; i < 6; i++)
                check_one(flat[i], P, M, 1, 1);
            for (int R = 1; R <= 2; R++) {
                check_one("pipedream", P, M, 1, R);
                check_one("1f1b-rr", P, M, 1, R);
            }
            for (int v = 1; v <= 3; v++) {
                check_one("loopedbfs", P, M, v, 1);
                if (v == 1 || M % P == 0)
                    check_one("interleaved", P, M, v, 1);
            }
            check_one("zbv", P, M, 2, 1);
        }
    for (int P = 1; P <= 4; P++)
        for (int M = 2; M <= 8; M += 2)
            for (int n = 1; n <= 3; n++)
                check_zero2("1f1b-rr", P, M, 1, 2, n);
    check_drops("1f1b-rr", 2, 4, 1, 2, 0);
    check_drops("1f1b-rr", 2, 4, 1, 2, 2);
    check_drops("pipedream", 2, 4, 1, 2, 0);
    check_drops("interleaved", 2, 4, 2, 1, 0);
    check_drops("zbv", 2, 3, 2, 1, 0);
    /* replicas placed across stages: the schedule validates, its program
     * would wait on itself; lowering refuses it */
    pt_schedule *odd;
    pt_program *prog = NULL;
    CHECK(pt_schedule_parse("replicas 2\nplace 0,1 1,3\n0: F0.0 BW0.0\n"
                            "1: F0.1 BW0.1 F1.0 BW1.0\n3: F1.1 BW1.1\n",
                            &odd) == PT_OK &&
              pt_schedule_validate(odd) == PT_OK,
          "the odd placement: %s", pt_last_error());
    CHECK(pt_program_lower(odd, NULL, &prog) != PT_OK && !prog &&
              strstr(pt_last_error(), "cannot run"),
          "a program that deadlocks was lowered: %s", pt_last_error());
    pt_schedule_destroy(odd);
    printf("%d programs checked, %d failures\n", checked, failures);
    return failures ? 1 : 0;
}
