/* cmd_merge.c: `pipetrain merge SET_DIR OUT.safetensors`: writes the
 * weights of a checkpoint set (the folder a pipeline's stages saved, or a
 * Hugging Face model folder, sharded or not) as one file, the bytes
 * `train --save OUT.safetensors` would have written. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/commands.h"
#include "io/checkpoint.h"
#include "pipetrain.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: pipetrain merge SET_DIR OUT.safetensors\n\n"
               "Writes the weights of a checkpoint set (a folder: model.safetensors or\n"
               "model-*-of-*.safetensors with model.safetensors.index.json, as pipetrain's\n"
               "stages or Hugging Face's save_pretrained write it) into one safetensors file of\n"
               "the weights alone (F32, Hugging Face's names, metadata format \"pt\" and the\n"
               "model config): the file `pipetrain train --save FILE.safetensors` writes, byte\n"
               "for byte. The optimizer state stays in the folder. Tensors are copied one at a\n"
               "time. OUT is written atomically: an existing file under that name is replaced\n"
               "only once the new one is complete.\n\n"
               "Exit status: 0 merged; 1 the set was refused (a missing shard, files of two\n"
               "saves mixed, a malformed file; the message names it) or OUT could not be\n"
               "written; 2 a usage error (not two arguments, SET_DIR not a folder, OUT not\n"
               "ending in .safetensors).\n");
}

int cmd_merge(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        }
    if (argc != 3) {
        fprintf(stderr, "pipetrain merge: expected SET_DIR and OUT.safetensors, got %d arguments\n",
                argc - 1);
        usage(stderr);
        return 2;
    }
    const char *set = argv[1], *out = argv[2];
    struct stat sb;
    if (stat(set, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "pipetrain merge: %s is not a folder holding a checkpoint set\n", set);
        return 2;
    }
    size_t n = strlen(out);
    if (n < 12 || strcmp(out + n - 12, ".safetensors")) {
        fprintf(stderr, "pipetrain merge: %s does not end in .safetensors\n", out);
        return 2;
    }
    if (pt_checkpoint_merge(set, out) != PT_OK) {
        fprintf(stderr, "pipetrain merge: %s\n", pt_last_error());
        return 1;
    }
    printf("merged %s into %s\n", set, out);
    return 0;
}
