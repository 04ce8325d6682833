/* checkpoint_tokenizer.c: the tokenizer files a checkpoint set carries
 * (checkpoint.h), so that the folder is a model folder transformers'
 * AutoTokenizer and pipetrain's --tokenizer both read. */
#include "io/checkpoint_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/atomic_file.h"
#include "io/whole_file.h"

const char *const pt_set_tokenizer_files[] = {"tokenizer.json", "vocab.json", "merges.txt", NULL};

static int copy_into(const char *from, const char *dir, const char *name)
{
    unsigned char *bytes;
    size_t n;
    int rc = pt_read_whole_file(from, &bytes, &n);
    if (rc != PT_OK)
        return rc;
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    rc = pt_atomic_write_file(path, bytes, n);
    free(bytes);
    return rc;
}

static int is_file(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int pt_checkpoint_write_tokenizer(const char *staging, const char *tokenizer)
{
    struct stat sb;
    if (stat(tokenizer, &sb) != 0)
        return pt_fail(PT_EIO, "tokenizer %s is gone: it cannot go into the checkpoint", tokenizer);
    if (!S_ISDIR(sb.st_mode))
        return copy_into(tokenizer, staging, "tokenizer.json");
    char path[4096];
    int rc = PT_OK, copied = 0;
    for (int i = 0; rc == PT_OK && pt_set_tokenizer_files[i]; i++) {
        snprintf(path, sizeof path, "%s/%s", tokenizer, pt_set_tokenizer_files[i]);
        if (is_file(path) && (rc = copy_into(path, staging, pt_set_tokenizer_files[i])) == PT_OK)
            copied++;
    }
    if (rc == PT_OK && !copied)
        rc = pt_fail(PT_EFORMAT, "%s holds no tokenizer.json, vocab.json or merges.txt", tokenizer);
    return rc;
}
