/* fuzz_safetensors: the validating safetensors reader
 * (src/io/safetensors_read.c), as loading a checkpoint or a Hugging Face
 * model.safetensors uses it. The input is written as a file and opened with
 * pt_safetensors_open(); when the header is accepted, every tensor is found
 * by name, read whole with pt_safetensors_read_raw() and again through
 * pt_safetensors_read() with its own dtype and shape (both must succeed:
 * the header check promised the bytes are there), and every metadata entry
 * is looked up by its key. */
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    pt_safetensors *st = NULL;
    if (pt_safetensors_open(fuzz_write("in.safetensors", data, size, path, sizeof path), &st) !=
        PT_OK) {
        FUZZ_REQUIRE(!st, "a refused file was handed back");
        return 0;
    }
    for (int i = 0; i < pt_safetensors_count(st); i++) {
        const pt_st_info *info = pt_safetensors_info(st, i);
        FUZZ_REQUIRE(pt_safetensors_find(st, info->name) == info, "'%s' not found by name",
                     info->name);
        uint64_t bytes = info->end - info->begin;
        FUZZ_REQUIRE(bytes <= size, "tensor '%s' claims %llu bytes of a %zu-byte file", info->name,
                     (unsigned long long)bytes, size);
        unsigned char *a = malloc(bytes ? bytes : 1), *b = malloc(bytes ? bytes : 1);
        FUZZ_REQUIRE(a && b, "out of memory");
        FUZZ_REQUIRE(pt_safetensors_read_raw(st, info, a) == PT_OK, "read_raw '%s': %s", info->name,
                     pt_last_error());
        FUZZ_REQUIRE(pt_safetensors_read(st, info->name, info->dtype, info->ndim, info->shape, b) ==
                         PT_OK,
                     "read '%s': %s", info->name, pt_last_error());
        FUZZ_REQUIRE(!memcmp(a, b, bytes), "two reads of '%s' differ", info->name);
        free(a);
        free(b);
    }
    for (int i = 0; i < pt_safetensors_meta_count(st); i++) {
        const char *key, *value;
        pt_safetensors_meta_at(st, i, &key, &value);
        FUZZ_REQUIRE(key && value && pt_safetensors_meta(st, key) == value,
                     "metadata %d not found by its key", i);
    }
    FUZZ_REQUIRE(!pt_safetensors_find(st, "\x01 no such tensor"), "found a tensor never named");
    pt_safetensors_close(st);
    return 0;
}
