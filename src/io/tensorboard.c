/* tensorboard.c: TensorBoard event files (see tensorboard.h).
 *
 * The protobuf fields written, from tensorflow/core/util/event.proto and
 * tensorflow/core/framework/{summary,tensor,tensor_shape}.proto:
 *   Event      wall_time 1 (double), step 2 (int64), file_version 3 (string),
 *              summary 5 (Summary), session_log 7 (SessionLog)
 *   SessionLog status 1 (enum, START = 1)
 *   Summary    value 1 (repeated Value)
 *   Value      tag 1 (string), simple_value 2 (float), tensor 8 (TensorProto),
 *              metadata 9 (SummaryMetadata)
 *   SummaryMetadata plugin_data 1 (PluginData: plugin_name 1, content 2)
 *   TensorProto dtype 1 (DT_STRING = 7), tensor_shape 2 (empty: a scalar),
 *              string_val 8 (bytes) */
#include "io/tensorboard.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tensor/error.h"
#include "tensor/output_file.h"

struct pt_tb_writer {
    FILE *f;
    char *path;
};

uint32_t pt_crc32c(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        crc ^= p[i];
        for (int k = 0; k < 8; k++)
            crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
    }
    return crc ^ 0xFFFFFFFFu;
}

uint32_t pt_crc32c_masked(const void *data, size_t n)
{
    uint32_t crc = pt_crc32c(data, n);
    return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

static void put_le(uint8_t *out, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        out[i] = (uint8_t)(v >> (8 * i));
}

void pt_tfrecord_frame(const void *data, uint64_t n, uint8_t header[12], uint8_t footer[4])
{
    put_le(header, n, 8);
    put_le(header + 8, pt_crc32c_masked(header, 8), 4);
    put_le(footer, pt_crc32c_masked(data, (size_t)n), 4);
}

/* ---- protobuf encoding ------------------------------------------------ */

/* A growing message; a failed allocation is remembered and reported once. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    int oom;
} pbuf;

enum { WIRE_VARINT = 0, WIRE_FIXED64 = 1, WIRE_BYTES = 2, WIRE_FIXED32 = 5 };

static void pb_append(pbuf *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap < b->n + n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    if (n)
        memcpy(b->p + b->n, data, n);
    b->n += n;
}

static void pb_varint(pbuf *b, uint64_t v)
{
    uint8_t out[10];
    int n = 0;
    do {
        out[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        out[n++] |= v ? 0x80 : 0;
    } while (v);
    pb_append(b, out, (size_t)n);
}

static void pb_key(pbuf *b, int field, int wire) { pb_varint(b, (uint64_t)field << 3 | wire); }

static void pb_bytes(pbuf *b, int field, const void *data, size_t n)
{
    pb_key(b, field, WIRE_BYTES);
    pb_varint(b, n);
    pb_append(b, data, n);
}

static void pb_string(pbuf *b, int field, const char *s) { pb_bytes(b, field, s, strlen(s)); }

/* Appends a finished sub-message as a field of b, and frees it. */
static void pb_message(pbuf *b, int field, pbuf *sub)
{
    b->oom |= sub->oom;
    pb_bytes(b, field, sub->p, sub->n);
    free(sub->p);
    *sub = (pbuf){0};
}

static void pb_double(pbuf *b, int field, double v)
{
    uint64_t bits;
    uint8_t out[8];
    memcpy(&bits, &v, 8);
    put_le(out, bits, 8);
    pb_key(b, field, WIRE_FIXED64);
    pb_append(b, out, 8);
}

static void pb_float(pbuf *b, int field, float v)
{
    uint32_t bits;
    uint8_t out[4];
    memcpy(&bits, &v, 4);
    put_le(out, bits, 4);
    pb_key(b, field, WIRE_FIXED32);
    pb_append(b, out, 4);
}

/* ---- events ----------------------------------------------------------- */

enum {
    EVENT_WALL_TIME = 1,
    EVENT_STEP = 2,
    EVENT_FILE_VERSION = 3,
    EVENT_SUMMARY = 5,
    EVENT_SESSION_LOG = 7,
    SUMMARY_VALUE = 1,
    VALUE_TAG = 1,
    VALUE_SIMPLE = 2,
    VALUE_TENSOR = 8,
    VALUE_METADATA = 9,
    METADATA_PLUGIN_DATA = 1,
    PLUGIN_NAME = 1,
    TENSOR_DTYPE = 1,
    TENSOR_SHAPE = 2,
    TENSOR_STRING_VAL = 8,
    DT_STRING = 7,
    SESSION_LOG_STATUS = 1,
    SESSION_LOG_START = 1
};

static double wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* Starts an Event at step; the caller adds its one payload field. */
static pbuf event_begin(int64_t step)
{
    pbuf e = {0};
    pb_double(&e, EVENT_WALL_TIME, wall_time());
    pb_key(&e, EVENT_STEP, WIRE_VARINT);
    pb_varint(&e, (uint64_t)step);
    return e;
}

/* Frames the event e as one record, writes it and frees e. */
static int write_event(pt_tb_writer *w, pbuf *e)
{
    if (e->oom) {
        free(e->p);
        return pt_fail(PT_ENOMEM, "%s: out of memory encoding an event", w->path);
    }
    uint8_t header[12], footer[4];
    pt_tfrecord_frame(e->p, e->n, header, footer);
    int bad = fwrite(header, 1, 12, w->f) != 12;
    bad |= fwrite(e->p, 1, e->n, w->f) != e->n;
    bad |= fwrite(footer, 1, 4, w->f) != 4;
    free(e->p);
    *e = (pbuf){0};
    if (bad)
        return pt_fail(PT_EIO, "%s: write failed: %s", w->path, strerror(errno));
    return PT_OK;
}

/* Writes an Event at step whose summary holds the one Value v (freed). */
static int write_value(pt_tb_writer *w, int64_t step, pbuf *v)
{
    pbuf summary = {0}, e = event_begin(step);
    pb_message(&summary, SUMMARY_VALUE, v);
    pb_message(&e, EVENT_SUMMARY, &summary);
    return write_event(w, &e);
}

int pt_tb_scalar(pt_tb_writer *w, const char *tag, int64_t step, float value)
{
    pbuf v = {0};
    pb_string(&v, VALUE_TAG, tag);
    pb_float(&v, VALUE_SIMPLE, value);
    return write_value(w, step, &v);
}

int pt_tb_text(pt_tb_writer *w, const char *tag, int64_t step, const char *text)
{
    pbuf plugin = {0}, metadata = {0}, tensor = {0}, shape = {0}, v = {0};
    pb_string(&plugin, PLUGIN_NAME, "text");
    pb_message(&metadata, METADATA_PLUGIN_DATA, &plugin);
    pb_key(&tensor, TENSOR_DTYPE, WIRE_VARINT);
    pb_varint(&tensor, DT_STRING);
    pb_message(&tensor, TENSOR_SHAPE, &shape);
    pb_string(&tensor, TENSOR_STRING_VAL, text);
    pb_string(&v, VALUE_TAG, tag);
    pb_message(&v, VALUE_TENSOR, &tensor);
    pb_message(&v, VALUE_METADATA, &metadata);
    return write_value(w, step, &v);
}

int pt_tb_restart(pt_tb_writer *w, int64_t step)
{
    pbuf log = {0}, e = event_begin(step);
    pb_key(&log, SESSION_LOG_STATUS, WIRE_VARINT);
    pb_varint(&log, SESSION_LOG_START);
    pb_message(&e, EVENT_SESSION_LOG, &log);
    return write_event(w, &e);
}

/* ---- the file --------------------------------------------------------- */

/* mkdir -p */
static int make_dirs(const char *dir)
{
    char *path = strdup(dir);
    if (!path)
        return pt_fail(PT_ENOMEM, "out of memory");
    int rc = PT_OK;
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0')
            continue;
        char c = *p;
        *p = '\0';
        struct stat sb;
        if (mkdir(path, 0777) != 0 &&
            (errno != EEXIST || stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))) {
            rc = pt_fail(PT_EIO, "--tensorboard %s: cannot make the folder %s: %s", dir, path,
                         errno == EEXIST ? "a file has that name" : strerror(errno));
            break;
        }
        *p = c;
        if (c == '\0')
            break;
    }
    free(path);
    return rc;
}

/* The seconds for the new file's name: now, or past every event file's
 * already in dir, so that name order is the order the runs were written. */
static long long file_seconds(const char *dir)
{
    static const char prefix[] = "events.out.tfevents.";
    long long secs = (long long)time(NULL);
    DIR *d = opendir(dir);
    if (!d)
        return secs;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, prefix, sizeof prefix - 1))
            continue;
        long long s = strtoll(e->d_name + sizeof prefix - 1, NULL, 10);
        if (s >= secs)
            secs = s + 1;
    }
    closedir(d);
    return secs;
}

int pt_tb_open(const char *dir, pt_tb_writer **out)
{
    *out = NULL;
    if (!dir || !*dir)
        return pt_fail(PT_EINVAL, "--tensorboard: the folder name is empty");
    int rc = make_dirs(dir);
    if (rc != PT_OK)
        return rc;
    char host[256] = "localhost";
    if (gethostname(host, sizeof host - 1) != 0 || !host[0])
        strcpy(host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *c = host; *c; c++)
        if (*c == '/')
            *c = '_';
    pt_tb_writer *w = calloc(1, sizeof *w);
    size_t n = strlen(dir) + strlen(host) + 96;
    if (!w || !(w->path = malloc(n))) {
        free(w);
        return pt_fail(PT_ENOMEM, "out of memory");
    }
    snprintf(w->path, n, "%s/events.out.tfevents.%lld.%s.%ld.pipetrain", dir, file_seconds(dir),
             host, (long)getpid());
    if (!(w->f = pt_open_output(w->path, "a"))) {
        free(w->path);
        free(w);
        return PT_EIO;
    }
    pbuf e = event_begin(0);
    pb_string(&e, EVENT_FILE_VERSION, "brain.Event:2");
    if ((rc = write_event(w, &e)) == PT_OK)
        rc = pt_tb_flush(w);
    if (rc != PT_OK) {
        fclose(w->f);
        free(w->path);
        free(w);
        return rc;
    }
    *out = w;
    return PT_OK;
}

const char *pt_tb_path(const pt_tb_writer *w) { return w->path; }

int pt_tb_flush(pt_tb_writer *w)
{
    if (fflush(w->f) != 0)
        return pt_fail(PT_EIO, "%s: write failed: %s", w->path, strerror(errno));
    return PT_OK;
}

int pt_tb_close(pt_tb_writer *w)
{
    if (!w)
        return PT_OK;
    int r = PT_OK;
    if (fclose(w->f) != 0)
        r = pt_fail(PT_EIO, "%s: close failed: %s", w->path, strerror(errno));
    free(w->path);
    free(w);
    return r;
}
