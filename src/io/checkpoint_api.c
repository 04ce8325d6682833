/* checkpoint_api.c: checkpoints of one model as the public API gives them
 * (pt_model_save, pt_model_load, pt_model_read_config): the step is the
 * training state a library user keeps; the data position is the caller's
 * own. A pipeline's stages save and load through the trainer's
 * stage_checkpoint.c instead. */
#include "io/checkpoint.h"

int pt_model_save(const pt_model *m, pt_optimizer *opt, long step, const char *path)
{
    pt_train_state state = {.step = step};
    return pt_checkpoint_save(path, m, opt, opt ? &state : NULL);
}

int pt_model_load(pt_model *m, pt_optimizer *opt, long *step, const char *path)
{
    pt_train_state state = {0};
    int rc = pt_checkpoint_load(path, m, opt, opt ? &state : NULL);
    if (rc == PT_OK && step)
        *step = opt ? state.step : 0;
    pt_model_params_changed(m);
    return rc;
}

int pt_model_read_config(const char *path, pt_model_config *cfg)
{
    return pt_checkpoint_read_config(path, 0, cfg);
}
