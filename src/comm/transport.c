/* transport.c: the parts of the transport interface that do not depend on an
 * implementation: waiting on many requests, the log of bytes in flight,
 * reading the timeout from the environment, checking collective groups, the
 * one float addition both allreduces share, and knowing whether mpirun
 * started this process. Called by transport_threads.c, transport_mpi.c and
 * the executor. */
#include "comm/transport.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensor/error.h"

int pt_transport_wait_all(pt_transport *t, pt_request *reqs, int n)
{
    int first = PT_OK;
    for (int i = 0; i < n; i++) {
        if (reqs[i].kind == 0)
            continue;
        int rc = pt_transport_wait(t, &reqs[i]);
        if (rc != PT_OK && first == PT_OK)
            first = rc;
    }
    return first;
}

int pt_flight_init(pt_flight_log *f, int cap)
{
    memset(f, 0, sizeof *f);
    f->samples = calloc((size_t)(cap > 0 ? cap : 1), sizeof *f->samples);
    if (!f->samples)
        return pt_fail(PT_ENOMEM, "cannot allocate the transport's counter");
    f->cap = cap > 0 ? cap : 1;
    pthread_mutex_init(&f->mu, NULL);
    return PT_OK;
}

void pt_flight_free(pt_flight_log *f)
{
    if (!f->samples)
        return;
    free(f->samples);
    pthread_mutex_destroy(&f->mu);
    memset(f, 0, sizeof *f);
}

/* Holds f->mu. */
static void keep_sample(pt_flight_log *f)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    if (f->n < f->cap)
        f->samples[f->n++] =
            (pt_flight_sample){(double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec, f->bytes};
}

void pt_flight_restart(pt_flight_log *f)
{
    pthread_mutex_lock(&f->mu);
    f->n = 0;
    keep_sample(f);
    pthread_mutex_unlock(&f->mu);
}

/* bytes more (sent) or fewer (handed over) in flight */
static void count(pt_flight_log *f, size_t bytes, bool sent)
{
    if (!f)
        return;
    pthread_mutex_lock(&f->mu);
    if (sent)
        f->bytes += bytes;
    else
        f->bytes -= bytes < f->bytes ? bytes : f->bytes;
    keep_sample(f);
    pthread_mutex_unlock(&f->mu);
}

void pt_flight_sent(pt_flight_log *f, size_t bytes) { count(f, bytes, true); }

void pt_flight_handed(pt_flight_log *f, size_t bytes) { count(f, bytes, false); }

double pt_transport_env_timeout(double fallback)
{
    const char *s = getenv("PIPETRAIN_TIMEOUT");
    if (!s || !*s)
        return fallback;
    char *end;
    double v = strtod(s, &end);
    if (*end != '\0' || !(v >= 0.0))
        return fallback;
    return v;
}

int pt_transport_sort_group(const pt_transport *t, const int *group, int n, int *sorted, int *me)
{
    if (!group || n < 1 || n > t->size)
        return pt_fail(PT_EINVAL, "collective group of %d ranks in a world of %d", n, t->size);
    /* Insertion sort: groups are small, and this keeps the check in one pass. */
    for (int i = 0; i < n; i++) {
        int r = group[i];
        if (r < 0 || r >= t->size)
            return pt_fail(PT_EINVAL, "collective group names rank %d; ranks are 0..%d", r,
                           t->size - 1);
        int j = i;
        while (j > 0 && sorted[j - 1] > r) {
            sorted[j] = sorted[j - 1];
            j--;
        }
        if (j > 0 && sorted[j - 1] == r)
            return pt_fail(PT_EINVAL, "collective group names rank %d twice", r);
        sorted[j] = r;
    }
    *me = -1;
    for (int i = 0; i < n; i++)
        if (sorted[i] == t->rank)
            *me = i;
    if (*me < 0)
        return pt_fail(PT_EINVAL, "rank %d calls a collective of a group it is not in", t->rank);
    return PT_OK;
}

void pt_transport_add_f32(float *acc, const float *x, size_t count)
{
    for (size_t i = 0; i < count; i++)
        acc[i] = acc[i] + x[i];
}

int pt_transport_launched_by_mpirun(void)
{
    static const char *vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK",
                                 "MPI_LOCALNRANKS"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return 1;
    }
    return 0;
}

pt_mpi_options pt_mpi_options_default(void)
{
    pt_mpi_options o;
    o.timeout_s = pt_transport_env_timeout(30.0);
    return o;
}

#ifndef PT_HAVE_MPI
int pt_transport_mpi_create(const pt_mpi_options *opt, pt_transport **out)
{
    (void)opt;
    *out = NULL;
    return pt_fail(PT_EUNSUPPORTED,
                   "this build has no MPI: install Open MPI (libopenmpi-dev) and rebuild");
}
#endif
