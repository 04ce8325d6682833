/* text.c: the schedule text format, which users write by hand and
 * `pipetrain schedule --from FILE` loads; every generated schedule
 * round-trips through it unchanged (tests/test_sched_grid.c). The format,
 * also described in docs/schedules.md:
 *
 *   # a comment runs to the end of the line
 *   schedule 1f1b          name (optional; default "custom")
 *   workers 2              (optional; default: the highest worker line + 1)
 *   chunks 2               virtual stages in all (default: highest chunk + 1)
 *   microbatches 3         (default: highest micro-batch + 1)
 *   replicas 1             copies of each chunk (default 1)
 *   place 0 1              chunk c's worker, in chunk order; with replicas,
 *                          each chunk's workers joined by commas: 0,1 2,3
 *                          (default: chunk c on worker c % workers)
 *   0: F0.0 F0.1 BW0.0 F0.2 BW0.1 BW0.2
 *   1: F1.0 BW1.0 F1.1 BW1.1 F1.2 BW1.2
 *
 * A worker line is the worker, a colon, then one token per action in the
 * order the worker runs them; a worker may have several lines, which join.
 * A token is KIND CHUNK.MICROBATCH with KIND one of F, B, W, BW (B is the
 * input gradient alone, W the weight gradient alone, BW both). Asynchronous
 * schedules add @VERSION, the weight version a forward uses and its backward
 * repeats, and mark each backward after which the weights are updated with a
 * trailing '!': F0.5@2 ... BW0.5@2! . With replicas, which replica runs a
 * micro-batch follows from the worker line its actions are on.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/schedule.h"
#include "sched/textbuf.h"
#include "tensor/error.h"

int pt_schedule_format(const pt_schedule *s, char **text)
{
    pt_textbuf b = {0};
    char tok[48];
    *text = NULL;
    pt_textbuf_printf(&b, "# pipetrain schedule: one line per worker, actions in order\n");
    pt_textbuf_printf(&b, "schedule %s\nworkers %d\nchunks %d\nmicrobatches %d\n",
                      s->name[0] ? s->name : "custom", s->n_workers, s->n_chunks, s->n_micro);
    if (s->replicas > 1)
        pt_textbuf_printf(&b, "replicas %d\n", s->replicas);
    pt_textbuf_puts(&b, "place");
    for (int c = 0; c < s->n_chunks; c++)
        for (int k = 0; k < s->replicas; k++)
            pt_textbuf_printf(&b, "%s%d", k ? "," : " ", s->chunk_worker[c * s->replicas + k]);
    pt_textbuf_puts(&b, "\n");
    for (int w = 0; w < s->n_workers; w++) {
        pt_textbuf_printf(&b, "%d:", w);
        for (int i = 0; i < s->n_actions[w]; i++)
            pt_textbuf_printf(&b, " %s", pt_sched_action_str(&s->actions[w][i], tok, sizeof tok));
        pt_textbuf_puts(&b, "\n");
    }
    return pt_textbuf_finish(&b, text);
}

/* What the header says, before the schedule can be allocated. */
typedef struct {
    char name[32];
    int workers, chunks, micro, replicas;
    int *place; /* as written, n_place entries */
    int n_place, cap_place;
    int place_line;
} header;

typedef struct {
    int worker, line;
    pt_action a;
} parsed_action;

static int read_int(const char *s, char **end, int line, const char *what, int *out)
{
    *out = 0;
    errno = 0;
    long v = strtol(s, end, 10);
    if (*end == s || errno || v < 0 || v > 100000000)
        return pt_fail(PT_EFORMAT, "line %d: expected a %s, found '%.20s'", line, what, s);
    *out = (int)v;
    return PT_OK;
}

static int parse_token(const char *tok, int line, pt_action *a)
{
    const char *p = tok;
    if (!strncmp(p, "BW", 2)) {
        a->kind = PT_ACT_BW;
        p += 2;
    } else if (*p == 'F' || *p == 'B' || *p == 'W') {
        a->kind = *p == 'F' ? PT_ACT_F : *p == 'B' ? PT_ACT_B : PT_ACT_W;
        p++;
    } else {
        return pt_fail(PT_EFORMAT,
                       "line %d: '%s' is not an action (F, B, W or BW then "
                       "CHUNK.MICROBATCH, like F0.3)",
                       line, tok);
    }
    char *end;
    a->version = -1;
    a->update = false;
    if (!isdigit((unsigned char)*p) || read_int(p, &end, line, "chunk", &a->chunk) != PT_OK ||
        *end != '.' || !isdigit((unsigned char)end[1]) ||
        read_int(end + 1, &end, line, "micro-batch", &a->mb) != PT_OK)
        return pt_fail(PT_EFORMAT,
                       "line %d: '%s' is not an action (F, B, W or BW then "
                       "CHUNK.MICROBATCH, like F0.3)",
                       line, tok);
    if (*end == '@') {
        if (!isdigit((unsigned char)end[1]) ||
            read_int(end + 1, &end, line, "weight version", &a->version) != PT_OK)
            return pt_fail(PT_EFORMAT, "line %d: '%s': a weight version follows '@'", line, tok);
    }
    if (*end == '!') {
        a->update = true;
        end++;
    }
    if (*end)
        return pt_fail(PT_EFORMAT, "line %d: '%s': unexpected '%s' after the action", line, tok,
                       end);
    return PT_OK;
}

static int add_place(header *h, int w)
{
    if (h->n_place == h->cap_place) {
        int cap = h->cap_place ? 2 * h->cap_place : 16;
        int *p = realloc(h->place, (size_t)cap * sizeof(int));
        if (!p)
            return pt_fail(PT_ENOMEM, "out of memory reading a schedule");
        h->place = p;
        h->cap_place = cap;
    }
    h->place[h->n_place++] = w;
    return PT_OK;
}

/* place 0 1 2  or, with replicas, place 0,1 2,3 */
static int parse_place(header *h, char *rest, int line)
{
    h->n_place = 0;
    h->place_line = line;
    char *save = NULL;
    for (char *tok = strtok_r(rest, " \t", &save); tok; tok = strtok_r(NULL, " \t", &save))
        for (char *p = tok; *p;) {
            char *end;
            int w, rc = read_int(p, &end, line, "worker", &w);
            if (rc == PT_OK)
                rc = add_place(h, w);
            if (rc != PT_OK)
                return rc;
            if (*end == ',')
                end++;
            else if (*end)
                return pt_fail(PT_EFORMAT, "line %d: place: unexpected '%s'", line, end);
            p = end;
        }
    return PT_OK;
}

static int parse_header_line(header *h, char *key, char *rest, int line)
{
    if (!strcmp(key, "schedule")) {
        char *save = NULL;
        char *name = strtok_r(rest, " \t", &save);
        if (!name || strtok_r(NULL, " \t", &save))
            return pt_fail(PT_EFORMAT, "line %d: schedule takes one name", line);
        for (const char *p = name; *p; p++)
            if (!isalnum((unsigned char)*p) && !strchr("_-+.", *p))
                return pt_fail(PT_EFORMAT,
                               "line %d: a schedule name holds letters, digits and "
                               "_-+. only",
                               line);
        snprintf(h->name, sizeof h->name, "%s", name);
        return PT_OK;
    }
    if (!strcmp(key, "place"))
        return parse_place(h, rest, line);
    int *field = !strcmp(key, "workers")        ? &h->workers
                 : !strcmp(key, "chunks")       ? &h->chunks
                 : !strcmp(key, "microbatches") ? &h->micro
                 : !strcmp(key, "replicas")     ? &h->replicas
                                                : NULL;
    if (!field)
        return pt_fail(PT_EFORMAT,
                       "line %d: unknown line '%s' (expected schedule, workers, "
                       "chunks, microbatches, replicas, place, or WORKER: actions)",
                       line, key);
    char *end;
    while (*rest == ' ' || *rest == '\t')
        rest++;
    int rc = read_int(rest, &end, line, key, field);
    if (rc != PT_OK)
        return rc;
    while (*end == ' ' || *end == '\t')
        end++;
    if (*end || *field < 1)
        return pt_fail(PT_EFORMAT, "line %d: %s takes one number >= 1", line, key);
    return PT_OK;
}

/* Allocates the schedule once the whole text is read. */
static int build(header *h, const parsed_action *acts, int n, pt_schedule **out)
{
    int max_w = -1, max_c = -1, max_m = -1;
    for (int i = 0; i < n; i++) {
        max_w = acts[i].worker > max_w ? acts[i].worker : max_w;
        max_c = acts[i].a.chunk > max_c ? acts[i].a.chunk : max_c;
        max_m = acts[i].a.mb > max_m ? acts[i].a.mb : max_m;
    }
    int R = h->replicas ? h->replicas : 1;
    int W = h->workers ? h->workers : max_w + 1;
    int C = h->chunks ? h->chunks : (h->n_place ? h->n_place / R : max_c + 1);
    int M = h->micro ? h->micro : max_m + 1;
    if (W < 1 || C < 1 || M < 1)
        return pt_fail(PT_EFORMAT, "an empty schedule: no worker lines and no sizes");
    if (W % R != 0)
        return pt_fail(PT_EFORMAT, "workers (%d) must be a multiple of replicas (%d)", W, R);
    for (int i = 0; i < n; i++) {
        char tok[48];
        if (acts[i].worker >= W || acts[i].a.chunk >= C || acts[i].a.mb >= M)
            return pt_fail(PT_EFORMAT,
                           "line %d: %d: %s is outside %d workers, %d chunks, "
                           "%d micro-batches",
                           acts[i].line, acts[i].worker,
                           pt_sched_action_str(&acts[i].a, tok, sizeof tok), W, C, M);
    }
    if (h->n_place && h->n_place != C * R)
        return pt_fail(PT_EFORMAT,
                       "line %d: place lists %d workers; %d chunks x %d replicas "
                       "need %d",
                       h->place_line, h->n_place, C, R, C * R);
    int rc = pt_sched_alloc(W, C, M, R, out);
    if (rc != PT_OK)
        return rc;
    pt_schedule *s = *out;
    pt_sched_set_name(s, h->name[0] ? h->name : "custom");
    if (h->n_place)
        memcpy(s->chunk_worker, h->place, (size_t)C * (size_t)R * sizeof(int));
    char *routed = calloc((size_t)M * (size_t)C, 1);
    if (!routed)
        rc = pt_fail(PT_ENOMEM, "out of memory reading a schedule");
    for (int i = 0; rc == PT_OK && i < n; i++) {
        const pt_action *a = &acts[i].a;
        size_t at = (size_t)a->mb * (size_t)C + (size_t)a->chunk;
        for (int k = 0; k < R && !routed[at]; k++)
            if (s->chunk_worker[a->chunk * R + k] == acts[i].worker) {
                s->route[at] = k;
                routed[at] = 1;
            }
        rc =
            pt_sched_push_async(s, acts[i].worker, a->kind, a->chunk, a->mb, a->version, a->update);
    }
    free(routed);
    if (rc != PT_OK) {
        pt_schedule_destroy(s);
        *out = NULL;
    }
    return rc;
}

int pt_schedule_parse(const char *text, pt_schedule **out)
{
    *out = NULL;
    char *copy = strdup(text ? text : "");
    header h = {.name = ""};
    parsed_action *acts = NULL;
    int n = 0, cap = 0, rc = PT_OK, line = 0;
    bool seen_worker = false;
    if (!copy)
        return pt_fail(PT_ENOMEM, "out of memory reading a schedule");
    for (char *p = copy, *eol; rc == PT_OK && p && *p; p = eol ? eol + 1 : NULL) {
        line++;
        eol = strchr(p, '\n');
        if (eol)
            *eol = '\0';
        char *hash = strchr(p, '#');
        if (hash)
            *hash = '\0';
        while (isspace((unsigned char)*p))
            p++;
        if (!*p)
            continue;
        if (isdigit((unsigned char)*p)) {
            char *end;
            int w;
            rc = read_int(p, &end, line, "worker", &w);
            if (rc == PT_OK && *end != ':')
                rc = pt_fail(PT_EFORMAT,
                             "line %d: a worker line is WORKER: ACTIONS "
                             "(like '0: F0.0 BW0.0')",
                             line);
            seen_worker = true;
            char *save = NULL;
            for (char *tok = rc == PT_OK ? strtok_r(end + 1, " \t\r", &save) : NULL;
                 tok && rc == PT_OK; tok = strtok_r(NULL, " \t\r", &save)) {
                if (n == cap) {
                    cap = cap ? 2 * cap : 256;
                    parsed_action *q = realloc(acts, (size_t)cap * sizeof *q);
                    if (!q) {
                        rc = pt_fail(PT_ENOMEM, "out of memory reading a schedule");
                        break;
                    }
                    acts = q;
                }
                acts[n] = (parsed_action){.worker = w, .line = line};
                rc = parse_token(tok, line, &acts[n].a);
                n++;
            }
            continue;
        }
        if (seen_worker) {
            rc = pt_fail(PT_EFORMAT,
                         "line %d: header lines (schedule, workers, ...) come before "
                         "the worker lines",
                         line);
            break;
        }
        char *key = p;
        while (*p && !isspace((unsigned char)*p))
            p++;
        if (*p)
            *p++ = '\0';
        for (char *e = p + strlen(p); e > p && isspace((unsigned char)e[-1]);)
            *--e = '\0';
        rc = parse_header_line(&h, key, p, line);
    }
    if (rc == PT_OK)
        rc = build(&h, acts, n, out);
    free(acts);
    free(h.place);
    free(copy);
    return rc;
}

int pt_schedule_load(const char *path, pt_schedule **out)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pt_fail(PT_EIO, "cannot open schedule file '%s': %s", path, strerror(errno));
    pt_textbuf b = {0};
    char chunk[4096];
    size_t got;
    while ((got = fread(chunk, 1, sizeof chunk - 1, f)) > 0) {
        chunk[got] = '\0';
        if (strlen(chunk) != got) {
            fclose(f);
            pt_textbuf_free(&b);
            return pt_fail(PT_EFORMAT, "schedule file '%s' is not text", path);
        }
        pt_textbuf_puts(&b, chunk);
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        pt_textbuf_free(&b);
        return pt_fail(PT_EIO, "cannot read schedule file '%s'", path);
    }
    char *text;
    int rc = pt_textbuf_finish(&b, &text);
    if (rc != PT_OK)
        return rc;
    rc = pt_schedule_parse(text, out);
    free(text);
    if (rc != PT_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s: %s", path, pt_last_error());
        pt_set_error_message(msg);
    }
    return rc;
}
