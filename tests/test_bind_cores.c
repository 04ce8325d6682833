/* test_bind_cores: pt_pipeline_config.bind_cores on threads.
 * - P = 2 workers of one thread each: while the pipeline lives, the
 *   process's threads (read back from /proc/self/task/<tid>/status, as
 *   the kernel holds them) include one bound to the first CPU the process
 *   may use and one to the second, and the creating thread keeps all of
 *   its CPUs; a step's loss is the unbound pipeline's, bit for bit;
 * - one worker of two threads gets the first two CPUs as its set (checked
 *   where the process may use three or more: with two, the set is all);
 * - too few CPUs is refused with a message that names them: the creating
 *   thread restricted to one CPU, two workers asked for. */
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipetrain.h"
#include "tensor/rng.h"

#include "check.h"

/* A thread's Cpus_allowed_list ("0-3,6") as a set; 0 when unreadable. */
static int allowed_of(const char *tid, cpu_set_t *set)
{
    char path[300], line[512];
    snprintf(path, sizeof path, "/proc/self/task/%s/status", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int ok = 0;
    CPU_ZERO(set);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, "Cpus_allowed_list:", 18)) {
            for (char *s = line + 18; *s;) {
                char *end;
                long a = strtol(s, &end, 10), b = a;
                if (end == s) {
                    s++;
                    continue;
                }
                if (*end == '-')
                    b = strtol(end + 1, &end, 10);
                for (long c = a; c <= b && c < CPU_SETSIZE; c++)
                    CPU_SET((int)c, set);
                s = end;
            }
            ok = 1;
        }
    fclose(f);
    return ok;
}

/* how many of the process's threads have exactly `want` as their CPUs */
static int threads_bound_to(const cpu_set_t *want)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        cpu_set_t set;
        if (e->d_name[0] != '.' && allowed_of(e->d_name, &set) && CPU_EQUAL(&set, want))
            n++;
    }
    closedir(d);
    return n;
}

/* the first n CPUs of `from`, in order */
static cpu_set_t first_cpus(const cpu_set_t *from, int n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int c = 0, k = 0; k < n && c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, from))
            CPU_SET(c, &set), k++;
    return set;
}

/* the i-th CPU of `from` (from 0), alone */
static cpu_set_t nth_cpu(const cpu_set_t *from, int i)
{
    cpu_set_t one, two = first_cpus(from, i + 1), before = first_cpus(from, i);
    CPU_XOR(&one, &two, &before);
    return one;
}

static pt_model_config model(void)
{
    pt_model_config c = pt_model_config_gpt();
    c.n_layer = 2, c.n_head = 2, c.n_embd = 16, c.seq_len = 8, c.vocab = 32;
    return c;
}

static int open_pipeline(int stages, int threads, int bind, pt_pipeline **p)
{
    pt_model_config c = model();
    pt_optim_config oc = pt_optim_config_default(PT_OPTIM_ADAMW);
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.stages = stages, pc.microbatches = 4, pc.micro_batch_size = 1;
    pc.blas_threads = threads, pc.bind_cores = bind;
    return pt_pipeline_create(&c, &oc, &pc, p);
}

static float one_step(pt_pipeline *p)
{
    pt_model_config c = model();
    int rows = 4 * c.seq_len, tok[4 * 8 + 1];
    pt_rng r;
    pt_rng_seed(&r, 5);
    for (int i = 0; i <= rows; i++)
        tok[i] = (int)pt_rng_below(&r, (uint64_t)c.vocab);
    pt_microbatch b = {.batch = 4, .tokens = tok, .targets = tok + 1};
    float loss = -1.0f;
    CHECK(pt_pipeline_train_step(p, &b, 0, 1e-3f, &loss) == PT_OK, "step: %s", pt_last_error());
    return loss;
}

int main(void)
{
    cpu_set_t all;
    if (sched_getaffinity(0, sizeof all, &all) != 0 || CPU_COUNT(&all) < 2)
        return printf("test_bind_cores: needs 2 CPUs to bind two workers to: skipped\n"), 77;

    pt_pipeline *p;
    REQUIRE(open_pipeline(2, 1, 0, &p) == PT_OK, "unbound: %s", pt_last_error());
    float unbound = one_step(p);
    pt_pipeline_destroy(p);

    REQUIRE(open_pipeline(2, 1, 1, &p) == PT_OK, "bound: %s", pt_last_error());
    cpu_set_t cpu0 = nth_cpu(&all, 0), cpu1 = nth_cpu(&all, 1);
    CHECK(threads_bound_to(&cpu0) == 1 && threads_bound_to(&cpu1) == 1,
          "threads bound to the first CPU: %d, to the second: %d (want 1 and 1)",
          threads_bound_to(&cpu0), threads_bound_to(&cpu1));
    cpu_set_t mine;
    CHECK(sched_getaffinity(0, sizeof mine, &mine) == 0 && CPU_EQUAL(&mine, &all),
          "the creating thread lost CPUs");
    float bound = one_step(p);
    CHECK(memcmp(&bound, &unbound, sizeof bound) == 0, "bound loss %.9g, unbound %.9g", bound,
          unbound);
    printf("two workers bound to a CPU each: loss %.6f, as unbound\n", bound);
    pt_pipeline_destroy(p);

    if (CPU_COUNT(&all) >= 3) {
        REQUIRE(open_pipeline(1, 2, 1, &p) == PT_OK, "one worker: %s", pt_last_error());
        cpu_set_t two = first_cpus(&all, 2);
        CHECK(threads_bound_to(&two) >= 1, "no thread bound to the first two CPUs");
        one_step(p);
        pt_pipeline_destroy(p);
    } else {
        printf("one worker on two threads: the process has 2 CPUs, not checked\n");
    }

    cpu_set_t one = nth_cpu(&all, 0);
    REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0, "cannot restrict this thread");
    p = NULL;
    int rc = open_pipeline(2, 1, 1, &p);
    CHECK(rc == PT_EINVAL && !p, "two workers bound on one CPU: rc %d", rc);
    CHECK(strstr(pt_last_error(), "needs 2 CPUs") && strstr(pt_last_error(), "may use 1"),
          "message: %s", pt_last_error());
    printf("refused: %s\n", pt_last_error());
    sched_setaffinity(0, sizeof all, &all);
    return failures != 0;
}
