/* test_sched_format: the schedule text format: a hand-written file with its
 * sizes and placement left out reads as the schedule its worker lines imply;
 * replicas are routed by the worker an action sits on; asynchronous tokens
 * (F0.1@1, BW0.1@1!) survive a round trip; malformed text is refused with
 * PT_EFORMAT and the line at fault, as are a place line naming no worker
 * and sizes beyond what the file describes; the route does not depend on
 * the order of the worker lines. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "sched/schedule.h"

#include "check.h"

static void refused(const char *text, const char *fragment)
{
    pt_schedule *s = NULL;
    int rc = pt_schedule_parse(text, &s);
    CHECK(rc == PT_EFORMAT && !s, "accepted: %s", text);
    CHECK(strstr(pt_last_error(), fragment), "message lacks '%s' for: %s", fragment, text);
    pt_schedule_destroy(s);
}

int main(void)
{
    pt_schedule *s = NULL, *g = NULL;
    int rc = pt_schedule_parse("# 1f1b by hand\n"
                               "0: F0.0 F0.1 BW0.0 BW0.1\n"
                               "1: F1.0 BW1.0 F1.1 BW1.1\n",
                               &s);
    CHECK(rc == PT_OK, "minimal file");
    if (rc == PT_OK) {
        CHECK(s->n_workers == 2 && s->n_chunks == 2 && s->n_micro == 2 && s->replicas == 1,
              "sizes %d %d %d", s->n_workers, s->n_chunks, s->n_micro);
        CHECK(!strcmp(pt_schedule_name(s), "custom"), "name %s", pt_schedule_name(s));
        CHECK(pt_schedule_validate(s) == PT_OK, "minimal file invalid");
        CHECK(pt_schedule_generate("1f1b", 2, 2, 0, &g) == PT_OK, "generate");
        pt_sched_set_name(s, "1f1b");
        CHECK(g && pt_sched_equal(s, g), "hand-written 1f1b differs from the generator's");
    }
    pt_schedule_destroy(s);
    pt_schedule_destroy(g);

    /* replicas: micro-batch 1 runs on the second replica of each stage */
    rc = pt_schedule_parse("schedule rr\nreplicas 2\nplace 0,1 2,3\n"
                           "0: F0.0 BW0.0\n1: F0.1 BW0.1\n2: F1.0 BW1.0\n3: F1.1 BW1.1\n",
                           &s);
    CHECK(rc == PT_OK, "replicated file");
    if (rc == PT_OK) {
        CHECK(pt_sched_worker_of(s, 1, 1) == 3 && pt_sched_worker_of(s, 0, 1) == 1 &&
                  pt_sched_worker_of(s, 1, 0) == 2,
              "routing");
        pt_action f = {PT_ACT_F, 0, 1, -1, false}, b = {PT_ACT_BW, 1, 1, -1, false};
        CHECK(pt_sched_send_to(s, &f) == 3 && pt_sched_recv_from(s, &b) == -1 &&
                  pt_sched_send_to(s, &b) == 1,
              "peers");
        CHECK(pt_schedule_validate(s) == PT_OK, "replicated file invalid");
        CHECK(pt_schedule_stages(s) == 2 && pt_schedule_workers(s) == 4, "stages");
    }
    pt_schedule_destroy(s);

    /* asynchronous tokens round-trip */
    const char *async_text = "# pipetrain schedule: one line per worker, actions in order\n"
                             "schedule pipedream\nworkers 1\nchunks 1\nmicrobatches 2\n"
                             "place 0\n0: F0.0@0 BW0.0@0! F0.1@1 BW0.1@1!\n";
    rc = pt_schedule_parse(async_text, &s);
    CHECK(rc == PT_OK, "async file");
    if (rc == PT_OK) {
        char *text = NULL;
        CHECK(pt_schedule_format(s, &text) == PT_OK && !strcmp(text, async_text),
              "async text changed:\n%s", text ? text : "");
        CHECK(s->actions[0][3].update && s->actions[0][3].version == 1, "async fields");
        CHECK(pt_schedule_validate(s) == PT_OK, "async file invalid");
        free(text);
    }
    pt_schedule_destroy(s);

    refused("0: F0.0 X0.0\n", "line 1: 'X0.0' is not an action");
    refused("0: F0.0\n1: F1\n", "line 2: 'F1' is not an action");
    refused("workers 2\nbogus 3\n", "line 2: unknown line 'bogus'");
    refused("workers two\n", "line 1: expected a workers");
    refused("0: F0.0\nworkers 1\n", "line 2: header lines");
    refused("workers 1\nchunks 1\nmicrobatches 1\n0: F0.0 F0.3\n", "outside");
    refused("place 0 1\nchunks 3\n0: F0.0\n", "place lists 2 workers");
    refused("workers 3\nreplicas 2\n0: F0.0\n", "multiple of replicas");
    refused("0 F0.0\n", "line 1: a worker line is WORKER: ACTIONS");
    refused("schedule a\"b\n", "letters, digits");
    refused("0: F0.0@\n", "weight version");
    refused("", "empty schedule");

    /* a place line naming a worker that does not exist (it was read past
     * the workers' arrays) */
    refused("workers 2\nplace 5 1\n0: F0.0 BW0.0\n1: F1.0 BW1.0\n",
            "line 2: place puts chunk 0 (replica 0) on worker 5, but there are 2 workers");
    /* sizes beyond what the file describes, refused before allocating */
    refused("workers 100000000\n0: F0.0\n", "100000000 workers, 1 chunks x 1 replicas");
    refused("chunks 100000000\n0: F0.0\n", "need 100000000 forwards, but the file holds 1");
    refused("0: F100000000.0 BW100000000.0", "need 100000001 forwards, but the file holds 2");
    refused("workers 60000\nreplicas 60000\nchunks 60000\n0: F0.0\n", "need 60000 forwards");

    /* the route does not depend on the order of the worker lines, so the
     * printed schedule (workers in order) reads back the same */
    rc = pt_schedule_parse("replicas 2\nchunks 2\n3: F1.1 BW1.1\n2: F1.1 BW1.1\n", &s);
    CHECK(rc == PT_OK && s && pt_sched_worker_of(s, 1, 1) == 2, "route by line order");
    if (rc == PT_OK) {
        char *text = NULL;
        CHECK(pt_schedule_format(s, &text) == PT_OK && pt_schedule_parse(text, &g) == PT_OK &&
                  pt_sched_equal(s, g),
              "parse -> print -> parse changed:\n%s", text ? text : "");
        free(text);
        pt_schedule_destroy(g);
    }
    pt_schedule_destroy(s);

    pt_schedule *none = NULL;
    CHECK(pt_schedule_load("/nonexistent/file.sched", &none) == PT_EIO && !none, "load");
    printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
