/* test_safetensors_refuses: malformed safetensors files are refused with
 * PT_EFORMAT and a message naming the tensor or byte offset, never a crash:
 * every truncation of a small valid file, random byte flips in its header,
 * and hand-made headers with one fault each (bad JSON, length past the end,
 * unknown dtype, offsets that disagree with the shape, overlap, gap, ...).
 * A caller asking for the wrong dtype or shape gets PT_EINVAL naming both.
 * A write that fails leaves the file already under the name untouched. */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "tensor/rng.h"

#include "check.h"

static char dir[] = "/tmp/pt_st_refuses_XXXXXX";
static char path[256];

static void write_bytes(const char *p, const void *data, size_t n)
{
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        perror(p);
        exit(1);
    }
    fclose(f);
}

static unsigned char *slurp(const char *p, size_t *n)
{
    FILE *f = fopen(p, "rb");
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

/* A file with the given header text (length prefix = its length, or
 * `claimed` when nonzero) followed by n_data zero bytes. */
static void write_raw(const char *header, uint64_t claimed, size_t n_data)
{
    size_t hl = strlen(header);
    uint64_t len = claimed ? claimed : hl;
    unsigned char *buf = calloc(1, 8 + hl + n_data);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(len >> (8 * i));
    memcpy(buf + 8, header, hl);
    write_bytes(path, buf, 8 + hl + n_data);
    free(buf);
}

/* Opening `path` must fail with `status` and a message holding `want`. */
static void expect_open_fails(int line, int status, const char *want)
{
    pt_safetensors *st = NULL;
    int r = pt_safetensors_open(path, &st);
    if (r != status || !strstr(pt_last_error(), want)) {
        fprintf(stderr, "line %d: open gave %d \"%s\"; expected %d with \"%s\"\n", line, r,
                pt_last_error(), status, want);
        failures++;
    }
    if (r == PT_OK)
        pt_safetensors_close(st);
}
#define EXPECT_REFUSED(header, claimed, n_data, want)  \
    do {                                               \
        write_raw(header, claimed, n_data);            \
        expect_open_fails(__LINE__, PT_EFORMAT, want); \
    } while (0)

static void hand_made_headers(void)
{
    /* JSON faults, located by file byte offset (8 + position in header). */
    const char *trailing_comma =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},}";
    char want[64];
    snprintf(want, sizeof want, "byte %zu", 8 + strlen(trailing_comma) - 1);
    EXPECT_REFUSED(trailing_comma, 0, 8, want);
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 0, 8,
                   "unterminated object");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 0, 8,
                   "byte 63: text after the end");
    EXPECT_REFUSED("{\"a\":{\"dtype\":'F32',\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8,
                   "byte 22: unexpected character");
    EXPECT_REFUSED("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8,
                   "byte 11: invalid UTF-8");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 0, 8,
                   "leading zero");
    EXPECT_REFUSED("", 0, 0, "byte 8: unexpected end");
    EXPECT_REFUSED("[]", 0, 0, "not a JSON object");
    char deep[300];
    memset(deep, '[', 200);
    deep[200] = '\0';
    EXPECT_REFUSED(deep, 0, 0, "nested too deeply");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}",
                   0, 16, "duplicate key \"a\"");

    /* Header length. */
    EXPECT_REFUSED("{}", 1000, 0, "byte 0: header length 1000 runs past the end");
    EXPECT_REFUSED("{}", UINT64_MAX, 0, "runs past the end");

    /* Tensor entries. */
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F33\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8,
                   "tensor 'a': byte 22: unknown dtype \"F33\"");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,8]}}", 0, 8,
                   "tensor 'a': byte 13: no shape");
    EXPECT_REFUSED("{\"a\":{\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 8, "tensor 'a'");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 0, 8, "no data_offsets");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 0, 8,
                   "tensor 'a': byte 37: shape entry 0");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 0, 8,
                   "shape entry 0");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 0, 8,
                   "tensor 'a'");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8],\"x\":1}}", 0, 8,
                   "unknown field 'x'");
    EXPECT_REFUSED("{\"a\":[1,2]}", 0, 0, "tensor 'a'");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,12]}}", 0, 12,
                   "tensor 'a': data_offsets [0, 12] hold 12 bytes but F32 of this shape needs 8");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 0, 8,
                   "end before begin");
    EXPECT_REFUSED("{\"transformer.h.0.ln_1.weight\":{\"dtype\":\"F32\",\"shape\":[25],"
                   "\"data_offsets\":[0,100]}}",
                   0, 96,
                   "tensor 'transformer.h.0.ln_1.weight': data_offsets [0, 100] end past the "
                   "file's 96 data bytes");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                   0, 12, "tensor 'b': data_offsets [4, 12] overlap tensor 'a' [0, 8]");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[12,20]}}",
                   0, 20,
                   "tensor 'b': data_offsets [12, 20] leave data bytes [8, 12) to no tensor");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 0, 12,
                   "cover 8 of the file's 12 data bytes");
    EXPECT_REFUSED("{\"__metadata__\":{\"k\":1}}", 0, 0, "__metadata__ value 'k' is not a string");
    EXPECT_REFUSED("{\"__metadata__\":[]}", 0, 0, "__metadata__ is not an object");
    EXPECT_REFUSED("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],"
                   "\"data_offsets\":[0,8]}}",
                   0, 8, "shape entry 0");

    /* A hand-made file that is valid, to show the cases above fail for
     * their one fault: spaces and escapes in the header are fine. */
    write_raw(" { \"a\\u0062\" : {\"shape\":[2], \"dtype\":\"F32\", \"data_offsets\":[0,8]} } ", 0,
              8);
    pt_safetensors *st;
    int r = pt_safetensors_open(path, &st);
    CHECK(r == PT_OK, "valid hand-made file refused: %s", pt_last_error());
    if (r == PT_OK) {
        CHECK(pt_safetensors_find(st, "ab") != NULL, "escaped name not decoded");
        pt_safetensors_close(st);
    }
}

/* A small valid file, its bytes, and checks that every prefix and random
 * header corruptions are refused or read safely. */
static void truncations_and_flips(void)
{
    float a[2] = {1.0f, 2.0f}, b[3] = {3.0f, 4.0f, 5.0f};
    pt_st_tensor t[2] = {{"a", PT_DT_F32, 1, {2}, a}, {"b", PT_DT_F32, 1, {3}, b}};
    pt_st_meta m = {"step", "12"};
    int r = pt_safetensors_write(path, t, 2, &m, 1);
    CHECK(r == PT_OK, "write: %s", pt_last_error());
    size_t size = 0;
    unsigned char *good = slurp(path, &size);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--)
        hlen = (hlen << 8) | good[i];

    for (size_t len = 0; len < size; len++) {
        write_bytes(path, good, len);
        pt_safetensors *st = NULL;
        r = pt_safetensors_open(path, &st);
        const char *want = len < 8 ? "too short" : len < 8 + hlen ? "runs past the end" : "data";
        CHECK(r == PT_EFORMAT && strstr(pt_last_error(), want),
              "prefix of %zu bytes: status %d, \"%s\"", len, r, pt_last_error());
        if (r == PT_OK)
            pt_safetensors_close(st);
    }

    /* The header itself cut at every length, its length prefix adjusted:
     * the JSON parser meets every kind of unterminated value. */
    uint64_t json_end = hlen; /* without the padding, which may go */
    while (json_end > 0 && good[8 + json_end - 1] == ' ')
        json_end--;
    unsigned char *cut = malloc(size);
    for (uint64_t k = 0; k < json_end; k++) {
        for (int i = 0; i < 8; i++)
            cut[i] = (unsigned char)(k >> (8 * i));
        memcpy(cut + 8, good + 8, k);
        memcpy(cut + 8 + k, good + 8 + hlen, size - 8 - hlen);
        write_bytes(path, cut, 8 + k + (size - 8 - hlen));
        pt_safetensors *st = NULL;
        r = pt_safetensors_open(path, &st);
        CHECK(r == PT_EFORMAT && strstr(pt_last_error(), "byte"),
              "header cut to %llu bytes: status %d, \"%s\"", (unsigned long long)k, r,
              pt_last_error());
        if (r == PT_OK)
            pt_safetensors_close(st);
    }
    free(cut);

    pt_rng rng;
    pt_rng_seed(&rng, 2024);
    unsigned char *bad = malloc(size);
    int opened = 0;
    for (int iter = 0; iter < 5000; iter++) {
        memcpy(bad, good, size);
        int flips = 1 + (int)pt_rng_below(&rng, 3);
        for (int k = 0; k < flips; k++) {
            /* Mostly the JSON; sometimes the length prefix. */
            size_t at = iter % 10 == 0 ? pt_rng_below(&rng, 8) : 8 + pt_rng_below(&rng, hlen);
            if (pt_rng_below(&rng, 2))
                bad[at] ^= (unsigned char)(1u << pt_rng_below(&rng, 8));
            else
                bad[at] = (unsigned char)pt_rng_below(&rng, 256);
        }
        write_bytes(path, bad, size);
        pt_safetensors *st = NULL;
        r = pt_safetensors_open(path, &st);
        CHECK(r == PT_OK || r == PT_EFORMAT, "flip %d: status %d, \"%s\"", iter, r,
              pt_last_error());
        CHECK(r == PT_OK || pt_last_error()[0] != '\0', "flip %d: no message", iter);
        if (r == PT_OK) {
            opened++;
            for (int i = 0; i < pt_safetensors_count(st); i++) {
                const pt_st_info *info = pt_safetensors_info(st, i);
                unsigned char *dst = malloc(info->end - info->begin + 1);
                CHECK(pt_safetensors_read_raw(st, info, dst) == PT_OK, "read after flip: %s",
                      pt_last_error());
                free(dst);
            }
            pt_safetensors_close(st);
        }
    }
    printf("byte flips: %d of 5000 corrupted files still valid (e.g. a changed name)\n", opened);
    free(bad);
    free(good);
}

static void caller_mismatch(void)
{
    float a[2] = {1.0f, 2.0f};
    pt_st_tensor t = {"h.0.w", PT_DT_F32, 2, {1, 2}, a};
    CHECK(pt_safetensors_write(path, &t, 1, NULL, 0) == PT_OK, "write: %s", pt_last_error());
    pt_safetensors *st;
    CHECK(pt_safetensors_open(path, &st) == PT_OK, "open: %s", pt_last_error());
    float dst[4];
    int shape21[2] = {2, 1}, shape12[2] = {1, 2}, shape2[1] = {2};
    int r = pt_safetensors_read(st, "h.0.w", PT_DT_BF16, 2, shape12, dst);
    CHECK(r == PT_EINVAL && strstr(pt_last_error(), "tensor 'h.0.w' is F32, expected BF16"),
          "dtype mismatch: %d \"%s\"", r, pt_last_error());
    r = pt_safetensors_read(st, "h.0.w", PT_DT_F32, 2, shape21, dst);
    CHECK(r == PT_EINVAL &&
              strstr(pt_last_error(), "tensor 'h.0.w' has shape [1, 2], expected [2, 1]"),
          "shape mismatch: %d \"%s\"", r, pt_last_error());
    r = pt_safetensors_read(st, "h.0.w", PT_DT_F32, 1, shape2, dst);
    CHECK(r == PT_EINVAL && strstr(pt_last_error(), "has shape [1, 2], expected [2]"),
          "rank mismatch: %d \"%s\"", r, pt_last_error());
    r = pt_safetensors_read(st, "h.1.w", PT_DT_F32, 2, shape12, dst);
    CHECK(r == PT_EFORMAT && strstr(pt_last_error(), "no tensor 'h.1.w'"),
          "missing tensor: %d \"%s\"", r, pt_last_error());
    r = pt_safetensors_read(st, "h.0.w", PT_DT_F32, 2, shape12, dst);
    CHECK(r == PT_OK && dst[0] == 1.0f && dst[1] == 2.0f, "good read: %s", pt_last_error());
    pt_safetensors_close(st);
}

static int leftover_temp_files(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strstr(e->d_name, ".tmp."))
            n++;
    closedir(d);
    return n;
}

/* The file under the final name must be byte-identical after each failure. */
static void failed_writes_leave_the_old_file(void)
{
    float small[4] = {1, 2, 3, 4};
    pt_st_tensor t = {"w", PT_DT_F32, 1, {4}, small};
    CHECK(pt_safetensors_write(path, &t, 1, NULL, 0) == PT_OK, "write: %s", pt_last_error());
    size_t n_before, n_after;
    unsigned char *before = slurp(path, &n_before);

    /* A directory that does not exist. */
    char missing[300];
    snprintf(missing, sizeof missing, "%s/no/such/dir/x.safetensors", dir);
    int r = pt_safetensors_write(missing, &t, 1, NULL, 0);
    CHECK(r == PT_EIO && strstr(pt_last_error(), missing), "missing dir: %d \"%s\"", r,
          pt_last_error());

    /* A mistake in the request: refused before the file is touched. */
    pt_st_tensor twice[2] = {t, t};
    r = pt_safetensors_write(path, twice, 2, NULL, 0);
    CHECK(r == PT_EINVAL && strstr(pt_last_error(), "'w' given twice"), "duplicate: %d \"%s\"", r,
          pt_last_error());
    pt_st_tensor no_data = {"w", PT_DT_F32, 1, {4}, NULL};
    r = pt_safetensors_write(path, &no_data, 1, NULL, 0);
    CHECK(r == PT_EINVAL, "NULL data accepted");

    /* The disk fills up mid-write: RLIMIT_FSIZE makes writes past 4 KiB
     * fail with EFBIG, as a full disk would fail them. */
    size_t big_n = 1 << 16;
    float *big = calloc(big_n, sizeof *big);
    pt_st_tensor tb = {"w", PT_DT_F32, 1, {(int)big_n}, big};
    struct rlimit old;
    if (getrlimit(RLIMIT_FSIZE, &old) == 0) {
        struct rlimit lim = old;
        lim.rlim_cur = 4096;
        signal(SIGXFSZ, SIG_IGN);
        if (setrlimit(RLIMIT_FSIZE, &lim) == 0) {
            r = pt_safetensors_write(path, &tb, 1, NULL, 0);
            setrlimit(RLIMIT_FSIZE, &old);
            CHECK(r == PT_EIO && strstr(pt_last_error(), "the file was not changed"),
                  "write past the size limit: %d \"%s\"", r, pt_last_error());
        } else {
            printf("setrlimit unavailable: skipping the full-disk case\n");
        }
    }
    free(big);

    /* A directory we may not write to (meaningless for root). */
    if (geteuid() != 0) {
        chmod(dir, 0555);
        r = pt_safetensors_write(path, &t, 1, NULL, 0);
        chmod(dir, 0755);
        CHECK(r == PT_EIO, "read-only directory: %d \"%s\"", r, pt_last_error());
    }

    unsigned char *after = slurp(path, &n_after);
    CHECK(n_before == n_after && memcmp(before, after, n_before) == 0,
          "the file under the final name changed");
    CHECK(leftover_temp_files() == 0, "%d temporary files left behind", leftover_temp_files());
    free(before);
    free(after);
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    snprintf(path, sizeof path, "%s/x.safetensors", dir);
    hand_made_headers();
    truncations_and_flips();
    caller_mismatch();
    failed_writes_leave_the_old_file();
    unlink(path);
    rmdir(dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("safetensors refusals: ok\n");
    return 0;
}
