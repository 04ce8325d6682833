/* test_safetensors_roundtrip: tensors and metadata written by
 * pt_safetensors_write() read back bit-identical through the reader, in the
 * layout the format prescribes (8-byte little-endian length, space-padded
 * header a multiple of 8 long, __metadata__ first, contiguous offsets in the
 * order given), and a second write replaces the file without leaving a
 * temporary file behind. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "tensor/rng.h"

#include "check.h"

static unsigned char *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)size + 1);
    *n = fread(b, 1, (size_t)size, f);
    fclose(f);
    return b;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

int main(void)
{
    char dir[] = "/tmp/pt_st_roundtrip_XXXXXX";
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    char path[256];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);

    pt_rng rng;
    pt_rng_seed(&rng, 7);
    float w[2 * 3];
    pt_rng_fill_normal(&rng, w, 6, 1.0f);
    /* Values whose bits a careless copy would change. */
    uint32_t odd_bits[4] = {0x7fc00123u /* NaN with payload */, 0x80000000u /* -0 */,
                            0x00000001u /* denormal */, 0x7f800000u /* inf */};
    float odd[4];
    memcpy(odd, odd_bits, sizeof odd);
    float cube[2 * 2 * 2 * 3];
    pt_rng_fill_normal(&rng, cube, 24, 0.02f);
    int64_t step = 123456789012LL;
    uint64_t rng_state[4] = {rng.s[0], rng.s[1], rng.s[2], rng.s[3]};
    uint16_t bf16[5] = {0x3f80, 0xbf80, 0x0000, 0x7f80, 0x1234};
    uint8_t empty_u8[1] = {0};

    pt_st_tensor t[] = {
        {"transformer.h.0.attn.c_attn.weight", PT_DT_F32, 2, {2, 3}, w},
        {"odd", PT_DT_F32, 1, {4}, odd},
        {"optimizer.step", PT_DT_I64, 0, {0}, &step},
        {"rng.state", PT_DT_U64, 1, {4}, rng_state},
        {"half \"quoted\" \\ name", PT_DT_BF16, 1, {5}, bf16},
        {"empty", PT_DT_U8, 2, {0, 7}, empty_u8},
        {"cube", PT_DT_F32, 4, {2, 2, 2, 3}, cube},
    };
    int nt = (int)(sizeof t / sizeof t[0]);
    pt_st_meta meta[] = {
        {"format", "pt"},
        {"config", "{\"n_layer\": 4, \"n_embd\": 128}"},
        {"note", "line1\nline2\ttab \xc3\xa9t\xc3\xa9 \x01"},
    };
    int nm = 3;

    int r = pt_safetensors_write(path, t, nt, meta, nm);
    CHECK(r == PT_OK, "write: %s", pt_last_error());

    /* The layout on disk. */
    size_t size = 0;
    unsigned char *bytes = slurp(path, &size);
    CHECK(bytes != NULL, "cannot read back %s", path);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | bytes[i];
    CHECK(hlen % 8 == 0, "header length %llu is not a multiple of 8", (unsigned long long)hlen);
    CHECK(bytes[8] == '{', "header starts with '%c'", bytes[8]);
    size_t last = 8 + hlen - 1;
    while (bytes[last] == ' ')
        last--;
    CHECK(bytes[last] == '}', "header's last non-space byte is '%c'", bytes[last]);
    CHECK(8 + hlen - 1 - last < 8, "more than 7 bytes of padding");
    CHECK(memcmp(bytes + 8, "{\"__metadata__\":", 16) == 0, "__metadata__ is not first");
    size_t data_bytes = sizeof w + sizeof odd + 8 + 32 + 10 + sizeof cube;
    CHECK(size == 8 + hlen + data_bytes, "file is %zu bytes, expected %llu", size,
          (unsigned long long)(8 + hlen + data_bytes));
    CHECK(memcmp(bytes + 8 + hlen, w, sizeof w) == 0, "first tensor's data is not first");
    free(bytes);

    pt_safetensors *st;
    r = pt_safetensors_open(path, &st);
    CHECK(r == PT_OK, "open: %s", pt_last_error());
    if (r != PT_OK)
        return 1;
    CHECK(pt_safetensors_count(st) == nt, "%d tensors", pt_safetensors_count(st));
    uint64_t expect_begin = 0;
    for (int i = 0; i < nt && i < pt_safetensors_count(st); i++) {
        const pt_st_info *info = pt_safetensors_info(st, i);
        CHECK(strcmp(info->name, t[i].name) == 0, "tensor %d is '%s', expected '%s'", i, info->name,
              t[i].name);
        CHECK(info->dtype == t[i].dtype, "'%s' dtype %s", info->name, pt_dtype_name(info->dtype));
        CHECK(info->ndim == t[i].ndim, "'%s' ndim %d", info->name, info->ndim);
        size_t numel = 1;
        for (int d = 0; d < t[i].ndim; d++) {
            CHECK(info->shape[d] == t[i].shape[d], "'%s' dim %d", info->name, d);
            numel *= (size_t)t[i].shape[d];
        }
        CHECK(info->numel == numel, "'%s' numel %zu", info->name, info->numel);
        CHECK(info->begin == expect_begin, "'%s' begins at %llu", info->name,
              (unsigned long long)info->begin);
        expect_begin = info->end;
        CHECK(pt_safetensors_find(st, t[i].name) == info, "find '%s'", t[i].name);

        size_t nbytes = numel * pt_dtype_size(t[i].dtype);
        unsigned char *got = malloc(nbytes + 1);
        r = pt_safetensors_read(st, t[i].name, t[i].dtype, t[i].ndim, t[i].shape, got);
        CHECK(r == PT_OK, "read '%s': %s", t[i].name, pt_last_error());
        CHECK(nbytes == 0 || memcmp(got, t[i].data, nbytes) == 0, "'%s' differs", t[i].name);
        free(got);
    }
    CHECK(pt_safetensors_find(st, "missing") == NULL, "found a tensor never written");

    CHECK(pt_safetensors_meta_count(st) == nm, "%d metadata entries",
          pt_safetensors_meta_count(st));
    for (int i = 0; i < nm; i++) {
        const char *v = pt_safetensors_meta(st, meta[i].key);
        CHECK(v && strcmp(v, meta[i].value) == 0, "metadata '%s' = '%s'", meta[i].key,
              v ? v : "(null)");
        const char *k2, *v2;
        pt_safetensors_meta_at(st, i, &k2, &v2);
        CHECK(k2 && strcmp(k2, meta[i].key) == 0, "metadata entry %d is '%s'", i, k2);
    }
    CHECK(pt_safetensors_meta(st, "absent") == NULL, "absent metadata key found");
    pt_safetensors_close(st);

    /* No metadata at all, and no tensors: still a valid file. */
    r = pt_safetensors_write(path, NULL, 0, NULL, 0);
    CHECK(r == PT_OK, "empty write: %s", pt_last_error());
    r = pt_safetensors_open(path, &st);
    CHECK(r == PT_OK, "empty open: %s", pt_last_error());
    if (r == PT_OK) {
        CHECK(pt_safetensors_count(st) == 0 && pt_safetensors_meta_count(st) == 0,
              "empty file has entries");
        pt_safetensors_close(st);
    }

    /* Overwriting replaces the contents and leaves only the final file. */
    float v2[3] = {1.0f, 2.0f, 3.0f};
    pt_st_tensor t2 = {"v", PT_DT_F32, 1, {3}, v2};
    r = pt_safetensors_write(path, &t2, 1, NULL, 0);
    CHECK(r == PT_OK, "overwrite: %s", pt_last_error());
    r = pt_safetensors_open(path, &st);
    CHECK(r == PT_OK, "reopen: %s", pt_last_error());
    if (r == PT_OK) {
        float back[3];
        int shape[1] = {3};
        CHECK(pt_safetensors_count(st) == 1, "%d tensors after overwrite",
              pt_safetensors_count(st));
        r = pt_safetensors_read(st, "v", PT_DT_F32, 1, shape, back);
        CHECK(r == PT_OK && memcmp(back, v2, sizeof v2) == 0, "overwritten data differs");
        pt_safetensors_close(st);
    }
    CHECK(count_entries(dir) == 1, "%d files in the directory, expected 1", count_entries(dir));

    unlink(path);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("safetensors round trip: ok\n");
    return 0;
}
