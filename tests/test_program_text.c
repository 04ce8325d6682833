/* test_program_text: the program text format. Every generated schedule
 * over a grid (P = 1..6, M = 1..8, v = 1..3, 1..2 replicas), lowered for
 * training with a tied pair and for evaluation, prints, parses back to an
 * equal program and prints the same text again; parse -> print -> parse is
 * the identity on hand-written programs too. Malformed tokens are refused
 * with PT_EFORMAT and the line; the schedule parser refuses program text.
 * Hand-written bad programs are refused by the validator with a message
 * naming the problem: an unpaired send, collectives in different orders on
 * two workers, a deadlock, and the other faults of one action each. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/program.h"
#include "tensor/error.h"

#include "check.h"

static void round_trip(const pt_program *p, const char *what)
{
    char *text = NULL, *again = NULL;
    pt_program *back = NULL;
    CHECK(pt_program_format(p, &text) == PT_OK, "%s: format", what);
    int rc = text ? pt_program_parse(text, &back) : PT_EINVAL;
    CHECK(rc == PT_OK, "%s: parse of its own text -> %d (%s)", what, rc, pt_last_error());
    if (rc == PT_OK) {
        CHECK(pt_prog_equal(p, back), "%s: round trip changed the program", what);
        CHECK(pt_program_format(back, &again) == PT_OK && !strcmp(text, again),
              "%s: text differs after a round trip", what);
    }
    free(text);
    free(again);
    pt_program_destroy(back);
}

static void check_grid(const char *name, int P, int M, int v, int R)
{
    char what[96];
    snprintf(what, sizeof what, "%s P=%d M=%d v=%d R=%d", name, P, M, v, R);
    pt_schedule_config cfg = {
        .name = name, .stages = P, .microbatches = M, .virtual_stages = v, .replicas = R};
    pt_schedule *s = NULL;
    if (pt_schedule_create(&cfg, &s) != PT_OK) {
        CHECK(0, "%s: %s", what, pt_last_error());
        return;
    }
    int tied[2] = {0, pt_schedule_chunks(s) - 1};
    for (int fwd = 0; fwd < 2; fwd++) {
        pt_lower_options o = pt_lower_options_default();
        o.forward_only = fwd;
        o.tied = tied;
        o.n_tied = tied[1] > 0;
        pt_program *p = NULL;
        if (pt_program_lower(s, &o, &p) == PT_OK)
            round_trip(p, what);
        else
            CHECK(!strcmp(name, "pipedream") && M % R, "%s: lower: %s", what, pt_last_error());
        pt_program_destroy(p);
    }
    pt_schedule_destroy(s);
}

/* Parses text (which must parse), round-trips it and validates it. */
static int validate_text(const char *text, const char *what)
{
    pt_program *p = NULL;
    int rc = pt_program_parse(text, &p);
    CHECK(rc == PT_OK, "%s: does not parse: %s", what, pt_last_error());
    if (rc != PT_OK)
        return rc;
    round_trip(p, what);
    rc = pt_program_validate(p);
    pt_schedule_sim *sim = NULL;
    if (rc != PT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", pt_last_error());
        CHECK(pt_program_simulate(p, NULL, &sim) == rc && !sim,
              "%s: the simulator played an invalid program", what);
        pt_set_error_message(msg);
    }
    pt_schedule_sim_destroy(sim);
    pt_program_destroy(p);
    return rc;
}

static void refused(const char *text, int status, const char *fragment, const char *what)
{
    int rc = validate_text(text, what);
    CHECK(rc == status, "%s: status %d, want %d (%s)", what, rc, status, pt_last_error());
    CHECK(strstr(pt_last_error(), fragment), "%s: message\n  '%s'\nlacks\n  '%s'", what,
          pt_last_error(), fragment);
}

static void malformed(const char *text, const char *fragment)
{
    pt_program *p = NULL;
    int rc = pt_program_parse(text, &p);
    CHECK(rc == PT_EFORMAT && !p, "accepted: %s", text);
    CHECK(strstr(pt_last_error(), fragment), "message '%s' lacks '%s' for: %s", pt_last_error(),
          fragment, text);
    pt_program_destroy(p);
}

#define HEAD2 "program train\nworkers 2\nchunks 2\n"

int main(void)
{
    for (int P = 1; P <= 6; P++)
        for (int M = 1; M <= 8; M++) {
            const char *flat[] = {"gpipe", "1f1b", "zbh1", "zbh2", "zb1p", "zb2p"};
            for (int i = 0; i < 6; i++)
                check_grid(flat[i], P, M, 1, 1);
            for (int R = 1; R <= 2; R++) {
                check_grid("pipedream", P, M, 1, R);
                check_grid("1f1b-rr", P, M, 1, R);
            }
            for (int v = 1; v <= 3; v++) {
                check_grid("loopedbfs", P, M, v, 1);
                if (v == 1 || M % P == 0)
                    check_grid("interleaved", P, M, v, 1);
            }
            check_grid("zbv", P, M, 2, 1);
        }

    /* a good hand-written program: 1f1b, 2 workers, 2 micro-batches, tied */
    const char *good = "# by hand\nschedule by-hand\n" HEAD2 "microbatches 2\n"
                       "0: F0.0 SF0.0>1 F0.1 SF0.1>1 RB0.0<1 BW0.0 RB0.1<1 BW0.1 T0-1 N S\n"
                       "1: RF1.0<0 F1.0 BW1.0 SB1.0>0 RF1.1<0 F1.1 BW1.1 SB1.1>0\n"
                       "1: T0-1 N S   # a worker may continue on another line\n";
    CHECK(validate_text(good, "good") == PT_OK, "good program refused: %s", pt_last_error());
    const char *eval = "program eval\n0: F0.0 SF0.0>1\n1: RF1.0<0 F1.0\n";
    CHECK(validate_text(eval, "eval") == PT_OK, "eval program refused: %s", pt_last_error());

    refused(HEAD2 "0: F0.0 SF0.0>1 RB0.0<1 BW0.0 N S\n1: F1.0 BW1.0 SB1.0>0 N S\n", PT_EINVAL,
            "worker 0: SF0.0>1 (position 2) has no matching RF1.0<0 on worker 1", "unpaired send");
    refused("program train\nworkers 2\nchunks 2\nreplicas 2\nplace 0,1 0,1\n"
            "0: F0.0 F1.0 BW1.0 BW0.0 R0 R1 N S\n1: F0.1 F1.1 BW1.1 BW0.1 R1 R0 N S\n",
            PT_EINVAL,
            "collectives out of order: worker 0 reaches R0 (position 5) where worker 1 "
            "reaches R1 (position 5)",
            "collective order");
    refused(HEAD2 "0: F0.0 SF0.0>1 RB0.0<1 BW0.0 F0.1 SF0.1>1 RB0.1<1 BW0.1\n"
                  "1: RF1.1<0 F1.1 RF1.0<0 F1.0 BW1.0 SB1.0>0 BW1.1 SB1.1>0\n",
            PT_EDEADLOCK,
            "deadlock: worker 0 waits at RB0.0<1 (position 3) for SB1.0>0 (position 6) from "
            "worker 1; worker 1 waits at RF1.1<0 (position 1) for SF0.1>1 (position 6) from "
            "worker 0",
            "deadlock");
    refused(HEAD2 "0: F0.0 SF0.0>1 RB0.0<1 BW0.0 N S\n1: F1.0 RF1.0<0 BW1.0 SB1.0>0 N S\n",
            PT_EINVAL,
            "worker 1: RF1.0<0 (position 2) comes after F1.0 (position 1), which needs it",
            "late receive");
    refused(HEAD2 "0: F0.0 RB0.0<1 BW0.0\n1: F1.0 BW1.0 SB1.0>0\n", PT_EINVAL,
            "worker 1: F1.0 (position 1) needs the activation of F0.0 from worker 0, but no "
            "RF1.0<0 comes before it",
            "missing receive");
    refused(HEAD2 "0: F0.0 SF0.0>0 RB0.0<1 BW0.0\n1: RF1.0<0 F1.0 BW1.0 SB1.0>0\n", PT_EINVAL,
            "worker 0: SF0.0>0 (position 2) names worker 0, but chunk 1 for micro-batch 0 is on "
            "worker 1",
            "wrong peer");
    refused(HEAD2 "0: F0.0 SF0.0>1 RB0.0<1 BW0.0 N S\n1: RF1.0<0 F1.0 BW1.0 SB1.0>0 S\n", PT_EINVAL,
            "worker 1: S (position 5) comes before N, the global norm it waits for",
            "step before norm");
    refused(HEAD2 "0: F0.0 SF0.0>1 RB0.0<1 BW0.0 N S\n1: RF1.0<0 F1.0 BW1.0 SB1.0>0\n", PT_EINVAL,
            "worker 1 never reaches N", "missing norm");
    refused(HEAD2 "0: F0.0 SF0.0>1 RB0.0<1 BW0.0 N S F0.0\n1: RF1.0<0 F1.0 BW1.0 SB1.0>0 N S\n",
            PT_EINVAL, "worker 0: F0.0 (position 7) is repeated", "repeated forward");
    refused(HEAD2
            "0: F0.0 SF0.0>1 RB0.0<1 BW0.0 N T0-1 S\n1: RF1.0<0 F1.0 BW1.0 SB1.0>0 T0-1 N S\n",
            PT_EINVAL, "worker 0: T0-1 (position 6) comes after N (position 5)", "tied after norm");
    refused("program train\nworkers 2\nchunks 1\nmicrobatches 2\nreplicas 2\nplace 0,1\n"
            "0: F0.0 R0 BW0.0 N S\n1: F0.1 BW0.1 R0 N S\n",
            PT_EINVAL,
            "worker 0: R0 (position 2) comes before BW0.0 (position 3), a backward piece of "
            "chunk 0 it waits for",
            "early reduce");
    refused("program train\nmicrobatches 2\n0: F0.0@0 BW0.0@0! S0 F0.1@1 BW0.1@1!\n", PT_EINVAL,
            "worker 0: BW0.1@1! (position 5) updates chunk 0, but no S0 follows it",
            "async update without step");
    refused("program train\n0: F0.0@0 BW0.0@0! S0 N\n", PT_EINVAL,
            "N (position 4) has no place in an asynchronous program", "async norm");
    refused("program eval\n0: F0.0 SF0.0>1 BW0.0\n1: RF1.0<0 F1.0\n", PT_EINVAL,
            "a forward-only program runs no backward", "eval backward");

    malformed("0: F0.0 SF0.0>\n", "line 1: 'SF0.0>' is not an action");
    malformed("0: F0.0 R\n", "'R' is not an action");
    malformed("0: T0-\n", "'T0-' is not an action");
    malformed("0: S2x\n", "'S2x' is not an action");
    malformed("0: N3\n", "'N3' is not an action");
    malformed("0: RX0.0<1\n", "'RX0.0<1' is not an action");
    malformed("program bogus\n0: F0.0\n", "line 1: program is train or eval");

    pt_schedule *s = NULL;
    CHECK(pt_schedule_parse(good, &s) == PT_EFORMAT && !s &&
              strstr(pt_last_error(), "this is a lowered program"),
          "the schedule parser took a program: %s", pt_last_error());
    CHECK(pt_schedule_parse("0: F0.0 SF0.0>1\n1: RF1.0<0 F1.0\n", &s) == PT_EFORMAT && !s &&
              strstr(pt_last_error(), "line 1: 'SF0.0>1' is a program's action"),
          "the schedule parser took a program token: %s", pt_last_error());
    /* a schedule file reads as a program of compute actions alone, which
     * lacks its transfers */
    refused("0: F0.0 BW0.0\n1: F1.0 BW1.0\n", PT_EINVAL,
            "worker 0: BW0.0 (position 2) needs the gradient of B1.0 from worker 1, but no "
            "RB0.0<1 comes before it",
            "schedule as program");
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
