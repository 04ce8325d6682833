/* test_mpi_nonfinite_step: a step whose gradient is not finite is skipped
 * on both ranks of a 2-stage MPI pipeline and changes nothing
 * (tests/nonfinite_check.h); the checkpoint saved after it equals the one
 * saved before.
 *
 * mpi-ranks: 2 */
#include <mpi.h>

#include "nonfinite_check.h"

int main(void)
{
    pt_model_config mc = nf_model();
    pt_pipeline_config pc = pt_pipeline_config_default();
    pc.transport = PT_PIPELINE_MPI, pc.stages = 2, pc.microbatches = NF_M;
    pt_pipeline *probe;
    int rc = pt_pipeline_create(&mc, NULL, &pc, &probe);
    if (rc == PT_EUNSUPPORTED) {
        printf("skip: %s\n", pt_last_error());
        return 77;
    }
    REQUIRE(rc == PT_OK, "2 stages over MPI: %s", pt_last_error());
    check_rank = pt_pipeline_rank(probe);
    pt_pipeline_destroy(probe);
    char dir[64] = "/tmp/pt_mpi_nonfinite_XXXXXX";
    if (check_rank == 0 && !mkdtemp(dir))
        return printf("FAIL: mkdtemp\n"), 1;
    MPI_Bcast(dir, sizeof dir, MPI_CHAR, 0, MPI_COMM_WORLD);
    int fail = nf_check(2, PT_PIPELINE_MPI, dir) || failures;
    int any = 0;
    MPI_Allreduce(&fail, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (check_rank == 0) {
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            printf("could not remove %s\n", dir);
        if (!any)
            printf("ok\n");
    }
    return any;
}
