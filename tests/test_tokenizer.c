/* test_tokenizer: the byte-level BPE tokenizer's edge cases, on a small
 * tokenizer written here in both of its forms (tokenizer.json, and
 * vocab.json + merges.txt): the 256 byte symbols (id = byte) and a few
 * merges whose results are worked out by hand below. Empty text gives no
 * ids; bytes that are not UTF-8 encode and decode back exactly; a lone
 * <|endoftext|> is its one id and a partial one is text; a word of a
 * million letters (the heap merge loop) splits as the short loop splits a
 * short one; every place pt_tokenizer_cut offers leaves the ids unchanged;
 * decode(encode(x)) == x for random bytes; and malformed files are refused
 * with a message naming the file and the problem. The ids the library
 * gives for real text are checked against Hugging Face's tokenizers in
 * test_tokenizer_python.sh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/json.h"
#include "tensor/rng.h"
#include "text/byte_level.h"
#include "pipetrain.h"

#include "check.h"

static char dir[] = "/tmp/pt_tokenizer_XXXXXX";

/* The merges, in rank order, and the token each makes (ids from 256). */
static const char *const merges[][2] = {
    {"a", "a"}, {"aa", "aa"}, {"h", "e"},   {"l", "l"}, {"he", "ll"}, {"hell", "o"},
    {"Ġ", "w"}, {"o", "r"},   {"Ġw", "or"}, {"1", "1"}, {"Ġ", "Ġ"},   {"Ċ", "Ċ"},
};
#define N_MERGES  (int)(sizeof merges / sizeof merges[0])
#define ENDOFTEXT (256 + N_MERGES)
#define ID_AA     256
#define ID_AAAA   257
#define ID_HELLO  261
#define ID_OR     263
#define ID_WOR    264
#define ID_11     265
#define ID_SPACES 266
#define ID_LINES  267

static char *path_of(const char *name)
{
    static char p[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *name, const char *text)
{
    const char *p = path_of(name);
    char folder[512];
    snprintf(folder, sizeof folder, "%s", p);
    *strrchr(folder, '/') = 0;
    mkdir(folder, 0755);
    FILE *f = fopen(p, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        perror(p);
        exit(1);
    }
}

/* {"<byte 0>": 0, ..., "aa": 256, ..., "<|endoftext|>": ENDOFTEXT} */
static void write_vocab(FILE *f)
{
    fputc('{', f);
    for (int b = 0; b < 256; b++) {
        char s[2];
        int n = pt_byte_level_spell((unsigned char)b, s);
        pt_json_write_string(f, s, (size_t)n);
        fprintf(f, ": %d, ", b);
    }
    for (int i = 0; i < N_MERGES; i++) {
        char s[64];
        snprintf(s, sizeof s, "%s%s", merges[i][0], merges[i][1]);
        pt_json_write_string(f, s, strlen(s));
        fprintf(f, ": %d, ", 256 + i);
    }
    fprintf(f, "\"<|endoftext|>\": %d}", ENDOFTEXT);
}

static void write_fixtures(void)
{
    put("pair/x", "");
    FILE *f = fopen(path_of("pair/vocab.json"), "wb");
    write_vocab(f);
    fclose(f);
    f = fopen(path_of("pair/merges.txt"), "wb");
    fprintf(f, "#version: 0.2\n");
    for (int i = 0; i < N_MERGES; i++)
        fprintf(f, "%s %s\n", merges[i][0], merges[i][1]);
    fclose(f);
    f = fopen(path_of("tokenizer.json"), "wb");
    fprintf(f,
            "{\"version\": \"1.0\", \"truncation\": null, \"padding\": null,\n"
            "\"added_tokens\": [{\"id\": %d, \"content\": \"<|endoftext|>\", "
            "\"single_word\": false, \"lstrip\": false, \"rstrip\": false, "
            "\"normalized\": false, \"special\": true}],\n"
            "\"normalizer\": null,\n"
            "\"pre_tokenizer\": {\"type\": \"ByteLevel\", \"add_prefix_space\": false, "
            "\"trim_offsets\": true, \"use_regex\": true},\n"
            "\"post_processor\": null, \"decoder\": {\"type\": \"ByteLevel\"},\n"
            "\"model\": {\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
            "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, "
            "\"fuse_unk\": false, \"byte_fallback\": false, \"ignore_merges\": false,\n"
            "\"vocab\": ",
            ENDOFTEXT);
    write_vocab(f);
    fprintf(f, ",\n\"merges\": [");
    for (int i = 0; i < N_MERGES; i++) {
        /* both spellings the library writes: "a b" strings and [a, b] pairs */
        if (i % 2) {
            fprintf(f, "[\"%s\", \"%s\"]", merges[i][0], merges[i][1]);
        } else {
            fprintf(f, "\"%s %s\"", merges[i][0], merges[i][1]);
        }
        fputs(i + 1 < N_MERGES ? ", " : "]}}\n", f);
    }
    fclose(f);
}

/* ids of text[0..n), or NULL after a failed CHECK; *count set. */
static uint32_t *encode(pt_tokenizer *t, const char *text, size_t n, size_t *count)
{
    pt_token_ids ids = {0};
    int rc = pt_tokenizer_encode(t, text, n, &ids);
    CHECK(rc == PT_OK, "encode: %s", pt_last_error());
    *count = ids.n;
    return ids.ids;
}

static void expect_ids(int line, pt_tokenizer *t, const char *text, const uint32_t *want,
                       size_t n_want)
{
    size_t n;
    uint32_t *got = encode(t, text, strlen(text), &n);
    int same = n == n_want && (n == 0 || memcmp(got, want, n * sizeof *got) == 0);
    if (!same) {
        failures++;
        fprintf(stderr, "FAIL line %d: \"%s\" gave %zu ids:", line, text, n);
        for (size_t i = 0; i < n && i < 16; i++)
            fprintf(stderr, " %u", got[i]);
        fprintf(stderr, "; expected %zu\n", n_want);
    }
    free(got);
}
#define EXPECT_IDS(t, text, ...)                                              \
    do {                                                                      \
        const uint32_t want_[] = {__VA_ARGS__};                               \
        expect_ids(__LINE__, t, text, want_, sizeof want_ / sizeof want_[0]); \
    } while (0)

/* decode(encode(x)) == x */
static int round_trips(pt_tokenizer *t, const char *text, size_t n)
{
    size_t count, len;
    uint32_t *ids = encode(t, text, n, &count);
    char *back = NULL;
    int ok = ids && pt_tokenizer_decode(t, ids, count, &back, &len) == PT_OK && len == n &&
             memcmp(back, text, n) == 0;
    free(ids);
    free(back);
    return ok;
}

static void known_ids(pt_tokenizer *t)
{
    size_t n;
    uint32_t *none = encode(t, "", 0, &n);
    CHECK(n == 0, "empty text gave %zu ids", n);
    free(none);
    char *text;
    size_t len;
    CHECK(pt_tokenizer_decode(t, NULL, 0, &text, &len) == PT_OK && len == 0 && text[0] == 0,
          "decoding no ids");
    free(text);

    EXPECT_IDS(t, "hello world", ID_HELLO, ID_WOR, 'l', 'd');
    EXPECT_IDS(t, "<|endoftext|>", ENDOFTEXT);
    EXPECT_IDS(t, "hello<|endoftext|>hello", ID_HELLO, ENDOFTEXT, ID_HELLO);
    EXPECT_IDS(t, "<|endoftext|", '<', '|', 'e', 'n', 'd', 'o', 'f', 't', 'e', 'x', 't', '|');
    EXPECT_IDS(t, "aaaaa", ID_AAAA, 'a');
    EXPECT_IDS(t, "1111111", ID_11, ID_11, ID_11, '1');
    /* whitespace before a word: all but the last space; the last joins it */
    EXPECT_IDS(t, "a   b", 'a', ID_SPACES, ' ', 'b');
    EXPECT_IDS(t, "a   world", 'a', ID_SPACES, ID_WOR, 'l', 'd');
    EXPECT_IDS(t, "a\tworld", 'a', '\t', 'w', ID_OR, 'l', 'd');
    EXPECT_IDS(t, "a \n\n", 'a', ' ', ID_LINES);
    EXPECT_IDS(t, "a\n\nb", 'a', '\n', '\n', 'b');
    EXPECT_IDS(t, "it's", 'i', 't', '\'', 's');
    /* bytes that are not UTF-8 run together as "other" characters */
    EXPECT_IDS(t,
               "\xff\xfe"
               "a\x80",
               0xff, 0xfe, 'a', 0x80);

    const char bad[] = "\xff\xfe\xc3(\xe2\x82 \xf0\x9f\x98 \xed\xa0\x80 \xc0\xaf\x80\x80";
    CHECK(round_trips(t, bad, sizeof bad - 1), "bytes that are not UTF-8 do not round-trip");
    CHECK(round_trips(t, "a\0b\0\0 c", 7), "NUL bytes do not round-trip");

    uint32_t past = ENDOFTEXT + 1;
    char name[32];
    snprintf(name, sizeof name, "id %u ", past);
    CHECK(pt_tokenizer_decode(t, &past, 1, &text, &len) == PT_EINVAL &&
              strstr(pt_last_error(), name),
          "decoding id %u: %s", past, pt_last_error());
    CHECK(pt_tokenizer_token(t, ENDOFTEXT, &len) && len == 13, "the bytes of <|endoftext|>");
    CHECK(pt_tokenizer_vocab_size(t) == ENDOFTEXT + 1, "vocabulary %d", pt_tokenizer_vocab_size(t));
    CHECK(pt_tokenizer_endoftext(t) == ENDOFTEXT, "<|endoftext|> is %d", pt_tokenizer_endoftext(t));
}

/* A million letters are one word: the heap loop must merge as the short
 * one does, leftmost pair first. */
static void long_words(pt_tokenizer *t)
{
    size_t n = 1000001, count;
    char *text = malloc(n + 2);
    memset(text, 'a', n);
    uint32_t *ids = encode(t, text, n, &count);
    int ok = ids && count == n / 4 + 1 && ids[count - 1] == 'a';
    for (size_t i = 0; ok && i + 1 < count; i++)
        ok = ids[i] == ID_AAAA;
    CHECK(ok, "a million and one 'a' gave %zu ids, not %zu \"aaaa\" and an \"a\"", count,
          n / 4 + 1);
    free(ids);
    memset(text, '1', n);
    ids = encode(t, text, n, &count);
    CHECK(ids && count == n / 2 + 1 && ids[0] == ID_11 && ids[count - 1] == '1',
          "a million and one '1' gave %zu ids", count);
    free(ids);
    for (size_t i = 0; i < n; i++)
        text[i] = " \t\n"[i % 3];
    CHECK(round_trips(t, text, n), "a million whitespace characters do not round-trip");
    free(text);
}

/* Random text of pieces that meet in every way: decode(encode(x)) == x,
 * and the ids do not change where pt_tokenizer_cut cuts. */
static void random_texts(pt_tokenizer *t)
{
    static const char *const pieces[] = {
        "a",    "aa",       "hello", " world",        "\n",    "\n\n", " ",
        "\t",   "1",        "1111",  "<|endoftext|>", "<|end", "é",    "日本",
        "\xff", "\xe2\x82", "'s",    "'ll",           "\r\n",  "x"};
    pt_rng rng;
    pt_rng_seed(&rng, 7);
    int cuts = 0;
    for (int round = 0; round < 300; round++) {
        char text[4096];
        size_t n = 0;
        while (n < 3000) {
            const char *p = pieces[pt_rng_below(&rng, sizeof pieces / sizeof pieces[0])];
            memcpy(text + n, p, strlen(p));
            n += strlen(p);
        }
        CHECK(round_trips(t, text, n), "round %d: random text does not round-trip", round);
        size_t count;
        uint32_t *whole = encode(t, text, n, &count);
        for (size_t at = pt_tokenizer_cut(t, text, n, 1); whole && at < n;
             at = pt_tokenizer_cut(t, text, n, at + 1 + pt_rng_below(&rng, 200))) {
            size_t c1, c2;
            uint32_t *left = encode(t, text, at, &c1), *right = encode(t, text + at, n - at, &c2);
            int same = c1 + c2 == count && !memcmp(left, whole, c1 * sizeof *left) &&
                       !memcmp(right, whole + c1, c2 * sizeof *right);
            CHECK(same, "round %d: cutting at %zu of %zu changes the ids", round, at, n);
            free(left), free(right);
            cuts++;
        }
        free(whole);
    }
    CHECK(cuts > 1000, "only %d cuts offered", cuts);
}

/* A file that is refused: the status and a message naming the file and
 * the problem. */
static void expect_refusal(int line, const char *path, int status, const char *problem)
{
    pt_tokenizer *t = NULL;
    int rc = pt_tokenizer_load(path, &t);
    const char *name = strrchr(path, '/') + 1;
    if (rc != status || !strstr(pt_last_error(), problem) || !strstr(pt_last_error(), name)) {
        failures++;
        fprintf(stderr, "FAIL line %d: %s gave %d \"%s\"; expected %d naming the file and \"%s\"\n",
                line, path, rc, pt_last_error(), status, problem);
    }
    pt_tokenizer_destroy(t);
}
#define REFUSED(path, status, problem) expect_refusal(__LINE__, path, status, problem)

/* tokenizer.json with one part replaced: key "model" (etc.) gets value. */
static const char *json_with(const char *name, const char *key, const char *value)
{
    static const char *const parts[][2] = {
        {"normalizer", "null"},
        {"pre_tokenizer", "{\"type\": \"ByteLevel\", \"add_prefix_space\": false}"},
        {"decoder", "null"},
        {"added_tokens", "[]"},
        {"model", "{\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, "
                  "\"merges\": [\"a b\"]}"},
    };
    char text[4096] = "{";
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const char *v = strcmp(parts[i][0], key) ? parts[i][1] : value;
        if (v)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%s\"%s\": %s",
                     text[1] ? ", " : "", parts[i][0], v);
    }
    strcat(text, "}");
    put(name, text);
    return path_of(name);
}

/* vocab.json and merges.txt that are refused, and the problem named. */
static const struct {
    int line;
    const char *vocab, *merges, *problem;
} pair_cases[] = {
    {__LINE__, "{\"a\": 0, \"b\": 1,}", "a b\n", "vocab.json: byte 16"},
    {__LINE__, "{\"a\": 0, \"b\": -1}", "a b\n", "the id of \"b\" must be an integer"},
    {__LINE__, "{\"a\": 0, \"b\": 0}", "a b\n", "id 0 is given to two tokens"},
    {__LINE__, "[\"a\", \"b\"]", "a b\n", "vocab.json: not a JSON object"},
    {__LINE__, "{\"a\": 0, \"b\": 1, \"ab\": 2}", "#version: 0.2\na b\na b c\n",
     "merges.txt: line 3: a merge is two tokens"},
    {__LINE__, "{\"a\": 0, \"b\": 1, \"ab\": 2}", "a b\n\nb a\n", "merges.txt: line 2"},
    {__LINE__, "{\"a\": 0, \"b\": 1, \"ab\": 2}", "a c\n",
     "line 1: merge \"a c\": \"c\" is not in the vocabulary"},
    {__LINE__, "{\"a\": 0, \"b\": 1, \"ab\": 2}", "a b\nb a\n",
     "merge \"b a\": \"ba\" is not in the vocabulary"},
};

static void refusals(void)
{
    REFUSED(path_of("absent.json"), PT_EIO, "No such file");
    put("empty/x", "");
    REFUSED(path_of("empty"), PT_EIO, "no tokenizer in this folder");
    for (size_t i = 0; i < sizeof pair_cases / sizeof pair_cases[0]; i++) {
        put("bad/vocab.json", pair_cases[i].vocab);
        put("bad/merges.txt", pair_cases[i].merges);
        expect_refusal(pair_cases[i].line, path_of("bad"), PT_EFORMAT, pair_cases[i].problem);
    }

    /* an empty token is a token: it decodes to nothing (found by fuzz_tokenizer) */
    pt_tokenizer *base = NULL;
    size_t len = 1;
    CHECK(pt_tokenizer_load(json_with("e.json", "model", "{\"vocab\": {\"\": 6}, \"merges\": []}"),
                            &base) == PT_OK &&
              pt_tokenizer_token(base, 6, &len) && len == 0 && !pt_tokenizer_token(base, 5, &len),
          "a vocabulary of one empty token: %s", pt_last_error());
    pt_tokenizer_destroy(base);
    base = NULL;
    CHECK(pt_tokenizer_load(json_with("ok.json", "", NULL), &base) == PT_OK,
          "the base of the refusals below is refused: %s", pt_last_error());
    pt_tokenizer_destroy(base);
    REFUSED(json_with("n.json", "normalizer", "{\"type\": \"Lowercase\"}"), PT_EFORMAT,
            "normalizer Lowercase is not supported");
    REFUSED(json_with("p.json", "pre_tokenizer", "{\"type\": \"Whitespace\"}"), PT_EFORMAT,
            "pre_tokenizer Whitespace is not supported");
    REFUSED(json_with("p2.json", "pre_tokenizer", NULL), PT_EFORMAT,
            "pre_tokenizer null is not supported");
    REFUSED(json_with("d.json", "decoder", "{\"type\": \"WordPiece\"}"), PT_EFORMAT,
            "decoder WordPiece is not supported");
    REFUSED(json_with("m.json", "model", "{\"type\": \"WordPiece\", \"vocab\": {}}"), PT_EFORMAT,
            "model WordPiece is not supported");
    REFUSED(json_with("m2.json", "model", NULL), PT_EFORMAT, "no model object");
    REFUSED(json_with("m3.json", "model", "{\"vocab\": {\"a\": 0}, \"merges\": {}}"), PT_EFORMAT,
            "model.merges must be an array");
    REFUSED(json_with("m4.json", "model", "{\"vocab\": {\"a\": 0}, \"merges\": [[\"a\"]]}"),
            PT_EFORMAT, "model.merges[0]: a merge is a string");
    REFUSED(
        json_with("m5.json", "model", "{\"vocab\": {\"a\": 0}, \"merges\": [], \"dropout\": 0.1}"),
        PT_EFORMAT, "model.dropout is not supported");
    REFUSED(json_with("a.json", "added_tokens", "[{\"id\": 3, \"content\": \"\"}]"), PT_EFORMAT,
            "added_tokens[0].content must be a non-empty string");
    REFUSED(json_with("a2.json", "added_tokens", "[{\"content\": \"x\"}]"), PT_EFORMAT,
            "added_tokens[0]: an id must be an integer");
    put("trunc.json", "{\"model\": {\"vocab\": {\"a\": 0},");
    REFUSED(path_of("trunc.json"), PT_EFORMAT, "trunc.json: byte");
}

int main(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    write_fixtures();
    const char *forms[2] = {path_of("tokenizer.json"), path_of("pair")};
    for (int f = 0; f < 2; f++) {
        pt_tokenizer *t;
        int rc = pt_tokenizer_load(forms[f], &t);
        CHECK(rc == PT_OK, "%s: %s", forms[f], pt_last_error());
        if (rc != PT_OK)
            continue;
        known_ids(t);
        if (f == 0) {
            long_words(t);
            random_texts(t);
        }
        pt_tokenizer_destroy(t);
    }
    CHECK(pt_tokenizer_find(path_of("pair")) && pt_tokenizer_find(dir) &&
              !pt_tokenizer_find(path_of("absent")),
          "pt_tokenizer_find");
    refusals();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    int kept = system(cmd) != 0;
    if (kept)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("tokenizer: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}
