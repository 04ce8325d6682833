/* bind_cores.c: workers on threads bound to cores of their own
 * (pt_pipeline_config.bind_cores). Worker r gets the r-th run of `each`
 * CPUs (its BLAS threads) from the CPUs this process may use, in order;
 * the threads a worker starts for its products inherit its set. Unbound,
 * the kernel may move a worker between cores or run two on one for a
 * while, which lengthens whichever action is on the step's critical path;
 * docs/performance.md has what binding did to the schedules on two cores.
 * Refused where there are fewer CPUs than threads (binding two workers to
 * one core would serialise them) and under MPI, where mpirun binds its
 * ranks (--bind-to core). */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "runtime/pipeline_internal.h"
#include "tensor/error.h"

int pt_bind_plan(pt_pipeline *p, int each)
{
    if (p->mpi)
        return pt_fail(PT_EINVAL, "binding workers to cores is for workers on threads; under "
                                  "mpirun, bind the ranks with mpirun's --bind-to core");
    cpu_set_t allowed;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0)
        return pt_fail(PT_EUNSUPPORTED, "cannot read the CPUs this process may use");
    long need = (long)p->n_ranks * each;
    if (CPU_COUNT(&allowed) < need)
        return pt_fail(PT_EINVAL,
                       "binding %d workers of %d thread%s each to cores of their own needs "
                       "%ld CPUs; this process may use %d",
                       p->n_ranks, each, each == 1 ? "" : "s", need, CPU_COUNT(&allowed));
    if (!(p->bind_cpus = malloc(sizeof(int) * (size_t)need)))
        return pt_fail(PT_ENOMEM, "cannot allocate the workers' CPU sets");
    int n = 0;
    for (int cpu = 0; n < need && cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &allowed))
            p->bind_cpus[n++] = cpu;
    p->bind_each = each;
    return PT_OK;
}

int pt_bind_worker(pt_pipeline *p, int r)
{
    if (!p->bind_cpus)
        return PT_OK;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < p->bind_each; i++)
        CPU_SET(p->bind_cpus[r * p->bind_each + i], &set);
    if (pthread_setaffinity_np(p->workers[r].thread, sizeof set, &set) != 0)
        return pt_fail(PT_EUNSUPPORTED, "cannot bind worker %d to its cores", r);
    return PT_OK;
}
