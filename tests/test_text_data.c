/* test_text_data: the language-model data path. A directory is read by its
 * rule (regular files in name order; symlinks, hidden files, binaries with
 * NUL bytes, sub-directories and a second hard link skipped), each file's
 * last tenth is validation, loading twice gives the same split; the same
 * seed gives the same batches and a saved rng state resumes them; targets
 * are inputs shifted by one; evaluation batches are fixed. llm.c and
 * nanoGPT token files written here read back exactly (llm.c's version 2,
 * uint32 tokens, too, and the files pt_token_writer writes), and a token
 * past the vocabulary, a bad version, a truncation or an odd size is
 * refused naming the file and the problem. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/text_data.h"

#include "check.h"

static char dir[] = "/tmp/pt_text_data_XXXXXX";

static void put(const char *name, const void *data, size_t n)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        perror(p);
        exit(1);
    }
    fclose(f);
}

static int stream_is(const uint32_t *got, size_t n_got, const char *want)
{
    if (n_got != strlen(want))
        return 0;
    for (size_t i = 0; i < n_got; i++)
        if (got[i] != (unsigned char)want[i])
            return 0;
    return 1;
}

static void directory_rule(void)
{
    /* 19 and 30 bytes: validation takes the last 1 and 3. */
    const char *a = "alpha alpha alpha!\n";
    const char *b = "bravo bravo bravo bravo bravo\n";
    put("b.txt", b, strlen(b));
    put("a.txt", a, strlen(a));
    put(".hidden", "hidden text\n", 12);
    put("a.dat", "\0\0\0\2binary index", 16);
    char p[512], q[512];
    snprintf(p, sizeof p, "%s/a.txt.u8", dir);
    CHECK(symlink("a.txt", p) == 0, "symlink");
    snprintf(p, sizeof p, "%s/b.txt", dir);
    snprintf(q, sizeof q, "%s/c_hardlink", dir);
    CHECK(link(p, q) == 0, "hard link");
    snprintf(p, sizeof p, "%s/sub", dir);
    mkdir(p, 0755);
    put("sub/nested.txt", "nested\n", 7);

    const char *paths[1] = {dir};
    pt_token_data d;
    int r = pt_text_data_load(paths, 1, 0.1, &d);
    CHECK(r == PT_OK, "load: %s", pt_last_error());
    CHECK(d.n_files == 2, "%d files read, expected a.txt and b.txt", d.n_files);
    CHECK(d.vocab == 256, "vocab %d", d.vocab);
    CHECK(stream_is(d.train, d.n_train, "alpha alpha alpha!bravo bravo bravo bravo bra"),
          "training stream of %zu tokens is not a's head then b's head", d.n_train);
    CHECK(stream_is(d.val, d.n_val, "\nvo\n"), "validation stream of %zu tokens is not the tails",
          d.n_val);

    /* The same again: a deterministic split. Naming a file inside the
     * directory as well does not read it twice. */
    const char *twice[2] = {p /* sub: a directory */, dir};
    snprintf(q, sizeof q, "%s/a.txt", dir);
    const char *with_file[2] = {q, dir};
    pt_token_data d2;
    r = pt_text_data_load(with_file, 2, 0.1, &d2);
    CHECK(r == PT_OK, "load: %s", pt_last_error());
    CHECK(d2.n_files == 2 && d2.n_train == d.n_train && d2.n_val == d.n_val &&
              memcmp(d2.train, d.train, d.n_train * sizeof *d.train) == 0,
          "naming a.txt and its directory changed the corpus");
    pt_token_data_free(&d2);
    r = pt_text_data_load(twice, 2, 0.1, &d2);
    CHECK(r == PT_OK && d2.n_files == 3, "sub then dir: %d files (%s)", d2.n_files,
          pt_last_error());
    pt_token_data_free(&d2);
    r = pt_text_data_load(paths, 1, 0.1, &d2);
    CHECK(r == PT_OK && d2.n_train == d.n_train &&
              memcmp(d2.train, d.train, d.n_train * sizeof *d.train) == 0 && d2.n_val == d.n_val &&
              memcmp(d2.val, d.val, d.n_val * sizeof *d.val) == 0,
          "a second load differs");
    pt_token_data_free(&d2);
    pt_token_data_free(&d);

    /* Refusals. */
    snprintf(p, sizeof p, "%s/no-such-file", dir);
    const char *missing[1] = {p};
    r = pt_text_data_load(missing, 1, 0.1, &d);
    CHECK(r == PT_EIO && strstr(pt_last_error(), "no-such-file"), "missing: %d %s", r,
          pt_last_error());
    snprintf(p, sizeof p, "%s/empty", dir);
    mkdir(p, 0755);
    const char *empty[1] = {p};
    r = pt_text_data_load(empty, 1, 0.1, &d);
    CHECK(r == PT_EINVAL && strstr(pt_last_error(), "no text"), "empty dir: %d %s", r,
          pt_last_error());
    r = pt_text_data_load(paths, 1, 1.0, &d);
    CHECK(r == PT_EINVAL, "validation fraction 1 accepted");
}

/* Debian's fortunes, when installed: each text once, no strfile index. */
static void fortunes(void)
{
    const char *fdir = "/usr/share/games/fortunes";
    struct stat sb;
    if (stat(fdir, &sb) != 0) {
        printf("no %s: skipping that part\n", fdir);
        return;
    }
    const char *paths[1] = {fdir};
    pt_token_data d;
    int r = pt_text_data_load(paths, 1, 0.1, &d);
    CHECK(r == PT_OK, "fortunes: %s", pt_last_error());
    if (r != PT_OK)
        return;
    size_t zeros = 0;
    for (size_t i = 0; i < d.n_train; i++)
        zeros += d.train[i] == 0;
    CHECK(zeros == 0, "%zu NUL bytes in the corpus: a binary file was read", zeros);
    double ratio = (double)d.n_val / (double)(d.n_train + d.n_val);
    CHECK(ratio > 0.099 && ratio <= 0.1, "validation share %.4f", ratio);
    printf("fortunes: %d files, %zu training and %zu validation bytes\n", d.n_files, d.n_train,
           d.n_val);
    pt_token_data_free(&d);
}

static void batches(void)
{
    /* Token i is i: windows are recognisable. */
    enum { N = 1000, B = 4, T = 16 };
    uint32_t tokens[N];
    for (int i = 0; i < N; i++)
        tokens[i] = (uint32_t)i;
    int in1[B * T], tg1[B * T], in2[B * T], tg2[B * T];
    pt_batch_sampler s1, s2, s3;
    CHECK(pt_batch_sampler_init(&s1, tokens, N, B, T, 42) == PT_OK, "init");
    CHECK(pt_batch_sampler_init(&s2, tokens, N, B, T, 42) == PT_OK, "init");
    CHECK(pt_batch_sampler_init(&s3, tokens, N, B, T, 43) == PT_OK, "init");
    int differs = 0, lowest = N, highest = 0;
    for (int step = 0; step < 2000; step++) {
        pt_batch_next(&s1, in1, tg1);
        pt_batch_next(&s2, in2, tg2);
        CHECK(memcmp(in1, in2, sizeof in1) == 0 && memcmp(tg1, tg2, sizeof tg1) == 0,
              "step %d: same seed, different batch", step);
        pt_batch_next(&s3, in2, tg2);
        differs |= memcmp(in1, in2, sizeof in1) != 0;
        for (int b = 0; b < B; b++) {
            const int *x = in1 + b * T, *y = tg1 + b * T;
            for (int t = 0; t < T; t++) {
                if (x[t] != x[0] + t || y[t] != x[t] + 1) {
                    CHECK(0, "step %d row %d: not a window with targets shifted by one", step, b);
                    break;
                }
            }
            if (x[0] < lowest)
                lowest = x[0];
            if (x[0] > highest)
                highest = x[0];
        }
    }
    CHECK(differs, "seeds 42 and 43 gave the same batches");
    CHECK(lowest == 0 && highest == N - T - 1, "window starts span [%d, %d], expected [0, %d]",
          lowest, highest, N - T - 1);

    /* Saving and restoring the rng resumes the same sequence. */
    pt_rng saved = s1.rng;
    pt_batch_next(&s1, in1, tg1);
    pt_batch_next(&s1, in1, tg1);
    s2.rng = saved;
    pt_batch_next(&s2, in2, tg2);
    pt_batch_next(&s2, in2, tg2);
    CHECK(memcmp(in1, in2, sizeof in1) == 0, "restored rng state gave other batches");

    CHECK(pt_batch_sampler_init(&s1, tokens, T, B, T, 1) == PT_EINVAL, "T tokens accepted for T");
    CHECK(pt_batch_sampler_init(&s1, tokens, T + 1, B, T, 1) == PT_OK, "T+1 tokens refused");

    /* Evaluation batches: fixed windows (k*B + b)*T, all of them in range. */
    size_t count = pt_eval_batch_count(N, B, T);
    CHECK(count == (N - 1) / (B * T), "%zu evaluation batches", count);
    for (size_t k = 0; k < count; k++) {
        CHECK(pt_eval_batch(tokens, N, B, T, k, in1, tg1) == PT_OK, "eval batch %zu", k);
        for (int b = 0; b < B; b++)
            CHECK(in1[b * T] == (int)((k * B + (size_t)b) * T) &&
                      tg1[b * T + T - 1] == in1[b * T + T - 1] + 1,
                  "eval batch %zu row %d starts at %d", k, b, in1[b * T]);
    }
    CHECK(pt_eval_batch(tokens, N, B, T, count, in1, tg1) == PT_EINVAL, "batch past the end");
    CHECK(pt_eval_batch_count(B * T, B, T) == 0, "B*T tokens hold a full batch with targets");
    CHECK(pt_eval_batch_count(B * T + 1, B, T) == 1, "B*T+1 tokens hold no batch");
}

/* n_tok tokens of `width` bytes each (tok holds them so) */
static void write_llmc(const char *name, int32_t version, int32_t count, const void *tok,
                       size_t n_tok, size_t width)
{
    int32_t header[256] = {20240520, version, count};
    size_t n = sizeof header + n_tok * width;
    unsigned char *buf = malloc(n);
    memcpy(buf, header, sizeof header); /* the machine is little-endian */
    memcpy(buf + sizeof header, tok, n_tok * width);
    put(name, buf, n);
    free(buf);
}

static void expect_token_refusal(int line, const char *name, int vocab, int status,
                                 const char *want)
{
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    uint32_t *t;
    size_t n;
    int r = pt_token_file_read(p, vocab, &t, &n);
    if (r != status || !strstr(pt_last_error(), want) || !strstr(pt_last_error(), name)) {
        fprintf(stderr, "line %d: %s gave %d \"%s\"; expected %d with \"%s\"\n", line, name, r,
                pt_last_error(), status, want);
        failures++;
    }
    if (r == PT_OK)
        free(t);
}

static void token_files(void)
{
    enum { N = 500 };
    uint16_t tok[N];
    uint32_t want[N];
    for (int i = 0; i < N; i++)
        want[i] = tok[i] = (uint16_t)((i * 7919) % 50257);
    write_llmc("llmc.bin", 1, N, tok, N, 2);
    put("nanogpt.bin", tok, sizeof tok);

    const char *names[2] = {"llmc.bin", "nanogpt.bin"};
    for (int f = 0; f < 2; f++) {
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, names[f]);
        uint32_t *t;
        size_t n;
        int r = pt_token_file_read(p, 50257, &t, &n);
        CHECK(r == PT_OK, "%s: %s", names[f], pt_last_error());
        if (r == PT_OK) {
            CHECK(n == N && memcmp(t, want, sizeof want) == 0, "%s: %zu tokens, not as written",
                  names[f], n);
            free(t);
        }
        /* As a data set: the last tenth is validation. */
        pt_token_data d;
        r = pt_token_data_load_files(p, NULL, 50257, 0.1, &d);
        CHECK(r == PT_OK && d.n_train == 450 && d.n_val == 50 &&
                  memcmp(d.train, want, 450 * 4) == 0 && memcmp(d.val, want + 450, 50 * 4) == 0,
              "%s: split %zu + %zu", names[f], d.n_train, d.n_val);
        pt_token_data_free(&d);
    }
    char train[512], val[512];
    snprintf(train, sizeof train, "%s/llmc.bin", dir);
    snprintf(val, sizeof val, "%s/nanogpt.bin", dir);
    pt_token_data d;
    int r = pt_token_data_load_files(train, val, 50257, 0.1, &d);
    CHECK(r == PT_OK && d.n_train == N && d.n_val == N, "separate validation file: %s",
          pt_last_error());
    pt_token_data_free(&d);

    /* Token 3 is 23757: past a vocabulary of 20000. */
    expect_token_refusal(__LINE__, "llmc.bin", 20000, PT_EFORMAT,
                         "token 3 is 23757, not below the vocabulary size 20000");
    expect_token_refusal(__LINE__, "nanogpt.bin", 20000, PT_EFORMAT, "token 3 is 23757");
    expect_token_refusal(__LINE__, "nanogpt.bin", 0, PT_EINVAL, "vocabulary size 0");

    write_llmc("v3.bin", 3, N, tok, N, 2);
    expect_token_refusal(__LINE__, "v3.bin", 50257, PT_EFORMAT, "version 3 is not supported");
    write_llmc("v2_short.bin", 2, N, tok, N, 2);
    expect_token_refusal(__LINE__, "v2_short.bin", 50257, PT_EFORMAT,
                         "header says 500 tokens (2000 bytes) but 1000 bytes follow");
    write_llmc("short.bin", 1, N, tok, N - 1, 2);
    expect_token_refusal(__LINE__, "short.bin", 50257, PT_EFORMAT,
                         "header says 500 tokens (1000 bytes) but 998 bytes follow the header "
                         "(truncated)");
    write_llmc("long.bin", 1, N - 2, tok, N, 2);
    expect_token_refusal(__LINE__, "long.bin", 50257, PT_EFORMAT, "trailing bytes");
    write_llmc("zero.bin", 1, 0, tok, 0, 2);
    expect_token_refusal(__LINE__, "zero.bin", 50257, PT_EFORMAT, "gives 0 tokens");
    int32_t head_only[25] = {20240520, 1, 10};
    put("cut_header.bin", head_only, sizeof head_only);
    expect_token_refusal(__LINE__, "cut_header.bin", 50257, PT_EFORMAT,
                         "shorter than its 1024-byte header");
    put("odd.bin", tok, 7);
    expect_token_refusal(__LINE__, "odd.bin", 50257, PT_EFORMAT, "odd size");
    put("empty.bin", tok, 0);
    expect_token_refusal(__LINE__, "empty.bin", 50257, PT_EFORMAT, "empty token file");
    expect_token_refusal(__LINE__, "absent.bin", 50257, PT_EIO, "absent.bin");
}

/* Version 2 (uint32 tokens) read, and the writer's files of both versions
 * read back; a token past the vocabulary is refused by the writer. */
static void token_versions(void)
{
    enum { N = 300 };
    uint32_t big[N];
    for (int i = 0; i < N; i++)
        big[i] = (uint32_t)((i * 104729u) % 128000u);
    write_llmc("v2.bin", 2, N, big, N, 4);
    char p[512];
    snprintf(p, sizeof p, "%s/v2.bin", dir);
    uint32_t *t;
    size_t n;
    int r = pt_token_file_read(p, 128000, &t, &n);
    CHECK(r == PT_OK && n == N && memcmp(t, big, sizeof big) == 0, "v2.bin: %s", pt_last_error());
    if (r == PT_OK)
        free(t);
    expect_token_refusal(__LINE__, "v2.bin", 100000, PT_EFORMAT, "not below the vocabulary size");

    const int vocabs[2] = {50257, 128000};
    for (int v = 0; v < 2; v++) {
        snprintf(p, sizeof p, "%s/written%d.bin", dir, v);
        pt_token_writer *w;
        r = pt_token_writer_open(p, vocabs[v], &w);
        CHECK(r == PT_OK, "writer: %s", pt_last_error());
        if (r != PT_OK)
            continue;
        uint32_t part[N];
        for (int i = 0; i < N; i++)
            part[i] = big[i] % (uint32_t)vocabs[v];
        CHECK(pt_token_writer_add(w, part, 100) == PT_OK &&
                  pt_token_writer_add(w, part + 100, N - 100) == PT_OK,
              "writer add: %s", pt_last_error());
        CHECK(pt_token_writer_commit(w) == PT_OK, "commit: %s", pt_last_error());
        struct stat sb;
        CHECK(stat(p, &sb) == 0 && sb.st_size == 1024 + N * (v ? 4 : 2), "%s: %lld bytes", p,
              (long long)sb.st_size);
        r = pt_token_file_read(p, vocabs[v], &t, &n);
        CHECK(r == PT_OK && n == N && memcmp(t, part, sizeof part) == 0, "%s: %s", p,
              pt_last_error());
        if (r == PT_OK)
            free(t);
    }
    snprintf(p, sizeof p, "%s/refused.bin", dir);
    pt_token_writer *w;
    CHECK(pt_token_writer_open(p, 1000, &w) == PT_OK, "writer: %s", pt_last_error());
    uint32_t bad = 1000;
    r = pt_token_writer_add(w, &bad, 1);
    CHECK(r == PT_EINVAL && strstr(pt_last_error(), "token 1000"), "token 1000 of 1000: %d %s", r,
          pt_last_error());
    pt_token_writer_abort(w);
    CHECK(access(p, F_OK) != 0, "an aborted token file exists");
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    directory_rule();
    fortunes();
    batches();
    token_files();
    token_versions();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("text data: ok\n");
    return 0;
}
