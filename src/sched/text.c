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
 *
 * A lowered program (program.h) is written in the same format with a
 * `program train` (or `program eval`: forwards only) line in its header and
 * more tokens on its worker lines:
 *   SF0.3>1   send F0.3's activation to worker 1 (after F0.3)
 *   RF1.3<0   receive F1.3's input activation from worker 0 (before F1.3)
 *   SB1.3>0   send B1.3's (or BW1.3's) input gradient to worker 0
 *   RB0.3<1   receive the gradient B0.3 (or BW0.3) needs from worker 1
 *   R2        sum chunk 2's gradient over its replicas
 *   T0-3      sum the gradient of the parameter tied between chunks 0 and 3;
 *             TM0-3 average the two copies' values (asynchronous programs)
 *   N         the global gradient norm
 *   S  S2     the optimizer step of all the worker's chunks; of chunk 2
 * A send or receive names the chunk and micro-batch of the compute action on
 * its own worker: SF0.3>1 on worker 0 pairs with RF1.3<0 on worker 1.
 * The schedule parser refuses these tokens and the program line; the
 * program parser (program_text.c) reads both. This file holds the reader
 * and writer they share (text.h), and the schedule's side.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched/schedule.h"
#include "sched/text.h"
#include "tensor/error.h"

void pt_text_write_header(pt_textbuf *b, const char *name, const char *program, int workers,
                          int chunks, int micro, int replicas, const int *chunk_worker)
{
    pt_textbuf_printf(b, program ? "# pipetrain program: one line per worker, every action of a "
                                   "step in order\n"
                                 : "# pipetrain schedule: one line per worker, actions in order\n");
    pt_textbuf_printf(b, "schedule %s\n", name[0] ? name : "custom");
    if (program)
        pt_textbuf_printf(b, "program %s\n", program);
    pt_textbuf_printf(b, "workers %d\nchunks %d\nmicrobatches %d\n", workers, chunks, micro);
    if (replicas > 1)
        pt_textbuf_printf(b, "replicas %d\n", replicas);
    pt_textbuf_puts(b, "place");
    for (int c = 0; c < chunks; c++)
        for (int k = 0; k < replicas; k++)
            pt_textbuf_printf(b, "%s%d", k ? "," : " ", chunk_worker[c * replicas + k]);
    pt_textbuf_puts(b, "\n");
}

int pt_schedule_format(const pt_schedule *s, char **text)
{
    pt_textbuf b = {0};
    char tok[48];
    *text = NULL;
    pt_text_write_header(&b, s->name, NULL, s->n_workers, s->n_chunks, s->n_micro, s->replicas,
                         s->chunk_worker);
    for (int w = 0; w < s->n_workers; w++) {
        pt_textbuf_printf(&b, "%d:", w);
        for (int i = 0; i < s->n_actions[w]; i++)
            pt_textbuf_printf(&b, " %s", pt_sched_action_str(&s->actions[w][i], tok, sizeof tok));
        pt_textbuf_puts(&b, "\n");
    }
    return pt_textbuf_finish(&b, text);
}

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

/* Reads an unsigned number at *p, moving *p past it; false if none. */
static bool number(const char **p, int *out)
{
    long v = 0;
    if (!isdigit((unsigned char)**p))
        return false;
    while (isdigit((unsigned char)**p) && v <= 100000000)
        v = 10 * v + (*(*p)++ - '0');
    *out = (int)v;
    return v <= 100000000;
}

/* CHUNK.MICROBATCH */
static bool chunk_mb(const char **p, pt_prog_action *a)
{
    return number(p, &a->chunk) && *(*p)++ == '.' && number(p, &a->mb);
}

static int not_an_action(const char *tok, int line)
{
    return pt_fail(PT_EFORMAT,
                   "line %d: '%s' is not an action (F, B, W or BW then "
                   "CHUNK.MICROBATCH, like F0.3; in a program also SF0.3>1, RF1.3<0, "
                   "SB1.3>0, RB0.3<1, R2, T0-3, TM0-3, N, L, S, S2, G2, AF0.3/1, AB0.3/1, X0.3/1)",
                   line, tok);
}

/* The compute token's tail: @VERSION and the update mark. */
static int parse_async(const char *tok, const char *p, int line, pt_prog_action *a)
{
    if (*p == '@' && !(p++, number(&p, &a->version)))
        return pt_fail(PT_EFORMAT, "line %d: '%s': a weight version follows '@'", line, tok);
    if (*p == '!') {
        a->update = true;
        p++;
    }
    if (*p)
        return pt_fail(PT_EFORMAT, "line %d: '%s': unexpected '%s' after the action", line, tok, p);
    return PT_OK;
}

static int parse_token(const char *tok, int line, pt_prog_action *a)
{
    static const struct {
        const char *prefix;
        pt_prog_kind kind;
    } kinds[] = {{"SF", PT_PROG_SEND_ACT},
                 {"SB", PT_PROG_SEND_GRAD},
                 {"RF", PT_PROG_RECV_ACT},
                 {"RB", PT_PROG_RECV_GRAD},
                 {"BW", PT_PROG_BW},
                 {"TM", PT_PROG_TIED},
                 {"AF", PT_PROG_TENSOR_SUM},
                 {"AB", PT_PROG_TENSOR_SUM},
                 {"F", PT_PROG_F},
                 {"B", PT_PROG_B},
                 {"W", PT_PROG_W},
                 {"R", PT_PROG_REDUCE},
                 {"T", PT_PROG_TIED},
                 {"N", PT_PROG_NORM},
                 {"S", PT_PROG_STEP},
                 {"G", PT_PROG_GATHER},
                 {"L", PT_PROG_SEQUENCE_SUM},
                 {"X", PT_PROG_SCATTER}};
    *a = (pt_prog_action){.chunk = -1, .mb = -1, .peer = -1, .version = -1};
    size_t k = 0, n = sizeof kinds / sizeof kinds[0];
    while (k < n && strncmp(tok, kinds[k].prefix, strlen(kinds[k].prefix)))
        k++;
    if (k == n)
        return not_an_action(tok, line);
    const char *p = tok + strlen(kinds[k].prefix);
    a->kind = kinds[k].kind;
    a->mean = !strcmp(kinds[k].prefix, "TM");
    bool ok;
    switch (a->kind) {
    case PT_PROG_F:
    case PT_PROG_B:
    case PT_PROG_W:
    case PT_PROG_BW:
        if (!chunk_mb(&p, a))
            return not_an_action(tok, line);
        return parse_async(tok, p, line, a);
    case PT_PROG_SEND_ACT:
    case PT_PROG_SEND_GRAD: ok = chunk_mb(&p, a) && *p++ == '>' && number(&p, &a->peer); break;
    case PT_PROG_RECV_ACT:
    case PT_PROG_RECV_GRAD: ok = chunk_mb(&p, a) && *p++ == '<' && number(&p, &a->peer); break;
    case PT_PROG_REDUCE:
    case PT_PROG_GATHER: ok = number(&p, &a->chunk); break;
    case PT_PROG_TIED: ok = number(&p, &a->chunk) && *p++ == '-' && number(&p, &a->peer); break;
    case PT_PROG_STEP: ok = !*p || number(&p, &a->chunk); break;
    case PT_PROG_TENSOR_SUM:
        a->backward = tok[1] == 'B';
        ok = chunk_mb(&p, a) && *p++ == '/' && number(&p, &a->peer);
        break;
    case PT_PROG_SCATTER: ok = chunk_mb(&p, a) && *p++ == '/' && number(&p, &a->peer); break;
    default: ok = true; break;
    }
    if (!ok || *p)
        return not_an_action(tok, line);
    return PT_OK;
}
static int add_place(pt_text_header *h, int w)
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
static int parse_place(pt_text_header *h, char *rest, int line)
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

/* schedule NAME, or program train|eval */
static int parse_word(pt_text_header *h, const char *key, char *rest, int line)
{
    char *save = NULL;
    char *word = strtok_r(rest, " \t", &save);
    if (!word || strtok_r(NULL, " \t", &save))
        return pt_fail(PT_EFORMAT, "line %d: %s takes one %s", line, key,
                       strcmp(key, "program") ? "name" : "word, train or eval");
    if (!strcmp(key, "program")) {
        if (strcmp(word, "train") && strcmp(word, "eval"))
            return pt_fail(PT_EFORMAT, "line %d: program is train or eval, not '%s'", line, word);
        h->program_line = line;
        h->forward_only = !strcmp(word, "eval");
        return PT_OK;
    }
    for (const char *p = word; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_-+.", *p))
            return pt_fail(PT_EFORMAT,
                           "line %d: a schedule name holds letters, digits and "
                           "_-+. only",
                           line);
    snprintf(h->name, sizeof h->name, "%s", word);
    return PT_OK;
}

static int parse_header_line(pt_text_header *h, char *key, char *rest, int line)
{
    if (!strcmp(key, "schedule") || !strcmp(key, "program"))
        return parse_word(h, key, rest, line);
    if (!strcmp(key, "place"))
        return parse_place(h, rest, line);
    int *field = !strcmp(key, "workers")        ? &h->workers
                 : !strcmp(key, "chunks")       ? &h->chunks
                 : !strcmp(key, "microbatches") ? &h->micro
                 : !strcmp(key, "replicas")     ? &h->replicas
                                                : NULL;
    if (!field)
        return pt_fail(PT_EFORMAT,
                       "line %d: unknown line '%s' (expected schedule, program, workers, "
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

/* WORKER: TOKEN TOKEN ... */
static int parse_worker_line(pt_text *t, char *p, int line)
{
    char *end;
    int w, rc = read_int(p, &end, line, "worker", &w);
    if (rc == PT_OK && *end != ':')
        rc = pt_fail(PT_EFORMAT,
                     "line %d: a worker line is WORKER: ACTIONS "
                     "(like '0: F0.0 BW0.0')",
                     line);
    char *save = NULL;
    for (char *tok = rc == PT_OK ? strtok_r(end + 1, " \t\r", &save) : NULL; tok && rc == PT_OK;
         tok = strtok_r(NULL, " \t\r", &save)) {
        if (t->n == t->cap) {
            int cap = t->cap ? 2 * t->cap : 256;
            pt_text_action *q = realloc(t->acts, (size_t)cap * sizeof *q);
            if (!q)
                return pt_fail(PT_ENOMEM, "out of memory reading a schedule");
            t->acts = q;
            t->cap = cap;
        }
        t->acts[t->n] = (pt_text_action){.worker = w, .line = line};
        rc = parse_token(tok, line, &t->acts[t->n].a);
        t->n++;
    }
    return rc;
}

int pt_text_read(const char *text, pt_text *t)
{
    *t = (pt_text){.h = {.name = ""}};
    size_t len = text ? strlen(text) : 0;
    if (len > PT_TEXT_MAX_BYTES)
        return pt_fail(PT_EFORMAT, "a schedule text of %zu bytes is over the %d this reader takes",
                       len, PT_TEXT_MAX_BYTES);
    char *copy = strdup(text ? text : "");
    int rc = PT_OK, line = 0;
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
            seen_worker = true;
            t->worker_lines++;
            rc = parse_worker_line(t, p, line);
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
        rc = parse_header_line(&t->h, key, p, line);
    }
    free(copy);
    return rc;
}

void pt_text_free(pt_text *t)
{
    free(t->acts);
    free(t->h.place);
    *t = (pt_text){.h = {.name = ""}};
}

/* The sizes' bounds (pt_text_shape): what the file can describe. */
static int check_room(const pt_text *t, int W, int C, int M, int R)
{
    const pt_text_header *h = &t->h;
    long long room = (long long)t->n + h->n_place + t->worker_lines;
    if (room < 1)
        room = 1;
    if ((long long)M * C > (t->n > 1 ? t->n : 1))
        return pt_fail(PT_EFORMAT,
                       "%d micro-batches x %d chunks (from %s and %s) need %lld forwards, but the "
                       "file holds %d actions",
                       M, C, h->micro ? "the microbatches line" : "the highest micro-batch named",
                       h->chunks ? "the chunks line" : "the highest chunk named", (long long)M * C,
                       t->n);
    if (W > room || (long long)C * R > room)
        return pt_fail(PT_EFORMAT,
                       "%d workers, %d chunks x %d replicas: more than the file's %d actions, %d "
                       "place entries and %d worker lines can describe",
                       W, C, R, t->n, h->n_place, t->worker_lines);
    return PT_OK;
}

int pt_text_shape(const pt_text *t, int *workers, int *chunks, int *micro, int *replicas)
{
    const pt_text_header *h = &t->h;
    int max_w = -1, max_c = -1, max_m = -1;
    for (int i = 0; i < t->n; i++) {
        max_w = t->acts[i].worker > max_w ? t->acts[i].worker : max_w;
        max_c = t->acts[i].a.chunk > max_c ? t->acts[i].a.chunk : max_c;
        max_m = t->acts[i].a.mb > max_m ? t->acts[i].a.mb : max_m;
    }
    int R = h->replicas ? h->replicas : 1;
    int W = h->workers ? h->workers : max_w + 1;
    int C = h->chunks ? h->chunks : (h->n_place ? h->n_place / R : max_c + 1);
    int M = h->micro ? h->micro : max_m + 1;
    if (W < 1 || C < 1 || M < 1)
        return pt_fail(PT_EFORMAT, "an empty schedule: no worker lines and no sizes");
    if (W % R != 0)
        return pt_fail(PT_EFORMAT, "workers (%d) must be a multiple of replicas (%d)", W, R);
    if (h->n_place && h->n_place != (long long)C * R)
        return pt_fail(PT_EFORMAT,
                       "line %d: place lists %d workers; %d chunks x %d replicas "
                       "need %lld",
                       h->place_line, h->n_place, C, R, (long long)C * R);
    int rc = check_room(t, W, C, M, R);
    if (rc != PT_OK)
        return rc;
    for (int i = 0; i < t->n; i++) {
        const pt_text_action *x = &t->acts[i];
        if (x->worker >= W || x->a.chunk >= C || x->a.mb >= M)
            return pt_fail(PT_EFORMAT,
                           "line %d: %d: %s is outside %d workers, %d chunks, "
                           "%d micro-batches",
                           x->line, x->worker, pt_prog_action_str(&x->a, (char[48]){0}, 48), W, C,
                           M);
    }
    for (int i = 0; i < h->n_place; i++)
        if (h->place[i] >= W)
            return pt_fail(PT_EFORMAT,
                           "line %d: place puts chunk %d (replica %d) on worker %d, but there are "
                           "%d workers (0..%d)",
                           h->place_line, i / R, i % R, h->place[i], W, W - 1);
    *workers = W, *chunks = C, *micro = M, *replicas = R;
    return PT_OK;
}

void pt_text_placement(const pt_text *t, int chunks, int replicas, int *chunk_worker, int *route)
{
    int C = chunks, R = replicas;
    if (t->h.n_place)
        memcpy(chunk_worker, t->h.place, (size_t)C * (size_t)R * sizeof(int));
    /* -1 first marks the (micro-batch, chunk) pairs some holder acts on */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < t->n; i++) {
            const pt_text_action *x = &t->acts[i];
            if (!pt_prog_is_compute(x->a.kind))
                continue;
            int k = 0, *r = &route[x->a.mb * C + x->a.chunk];
            while (k < R && chunk_worker[x->a.chunk * R + k] != x->worker)
                k++;
            if (k == R)
                continue;
            if (pass == 0)
                *r = -1;
            else if (*r < 0 || x->worker < chunk_worker[x->a.chunk * R + *r])
                *r = k;
        }
}

int pt_schedule_parse(const char *text, pt_schedule **out)
{
    *out = NULL;
    pt_text t;
    char tok[48];
    int W, C, M, R;
    int rc = pt_text_read(text, &t);
    if (rc == PT_OK && t.h.program_line)
        rc = pt_fail(PT_EFORMAT,
                     "line %d: this is a lowered program, not a schedule (read it with "
                     "pt_program_parse)",
                     t.h.program_line);
    for (int i = 0; i < t.n && rc == PT_OK; i++)
        if (!pt_prog_is_compute(t.acts[i].a.kind))
            rc = pt_fail(PT_EFORMAT,
                         "line %d: '%s' is a program's action, not a schedule's (F, B, W or "
                         "BW)",
                         t.acts[i].line, pt_prog_action_str(&t.acts[i].a, tok, sizeof tok));
    if (rc == PT_OK)
        rc = pt_text_shape(&t, &W, &C, &M, &R);
    if (rc == PT_OK)
        rc = pt_sched_alloc(W, C, M, R, out);
    if (rc != PT_OK) {
        pt_text_free(&t);
        return rc;
    }
    pt_schedule *s = *out;
    pt_sched_set_name(s, t.h.name[0] ? t.h.name : "custom");
    pt_text_placement(&t, C, R, s->chunk_worker, s->route);
    for (int i = 0; i < t.n && rc == PT_OK; i++) {
        const pt_prog_action *a = &t.acts[i].a;
        rc = pt_sched_push_async(s, t.acts[i].worker, (pt_action_kind)a->kind, a->chunk, a->mb,
                                 a->version, a->update);
    }
    pt_text_free(&t);
    if (rc != PT_OK) {
        pt_schedule_destroy(s);
        *out = NULL;
    }
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
