/* fuzz_tokenizer: the byte-level BPE tokenizer (src/text/): the input up to
 * a line "@@" is written as tokenizer.json and loaded with
 * pt_tokenizer_load() (the JSON, the model's vocabulary and merges, the
 * added tokens, the pipeline around the model); the rest, or the whole
 * input when there is no such line, is text that an accepted tokenizer
 * encodes. Every id must decode; when each byte has a symbol and no prefix
 * space is added, decode(encode(x)) == x; and encoding the two sides of the
 * place pt_tokenizer_cut() offers gives the ids of the whole. */
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h"

#include "harness.h"

static int same_ids(const pt_token_ids *a, const uint32_t *b, size_t n)
{
    return a->n == n && (n == 0 || !memcmp(a->ids, b, n * sizeof *b));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    const uint8_t *sep = size >= 3 ? memmem(data, size, "\n@@\n", 4) : NULL;
    size_t json_n = sep ? (size_t)(sep - data) + 1 : size;
    const char *text = sep ? (const char *)sep + 4 : (const char *)data;
    size_t n = sep ? size - json_n - 3 : size;
    fuzz_write("tokenizer.json", data, json_n, path, sizeof path);
    pt_tokenizer *t = NULL;
    if (pt_tokenizer_load(path, &t) != PT_OK) {
        FUZZ_REQUIRE(!t, "a refused tokenizer was handed out");
        return 0;
    }
    pt_token_ids whole = {0}, parts = {0};
    FUZZ_REQUIRE(pt_tokenizer_encode(t, text, n, &whole) == PT_OK, "encode: %s", pt_last_error());
    char *back;
    size_t len;
    FUZZ_REQUIRE(pt_tokenizer_decode(t, whole.ids, whole.n, &back, &len) == PT_OK,
                 "an id of the encoding does not decode: %s", pt_last_error());
    int every_byte = !t->add_prefix_space;
    for (int b = 0; b < 256; b++)
        every_byte &= t->bpe.byte_id[b] >= 0;
    FUZZ_REQUIRE(!every_byte || (len == n && !memcmp(back, text, n)),
                 "decode(encode(x)) is %zu bytes, not the %zu of x", len, n);
    free(back);
    size_t cut = pt_tokenizer_cut(t, text, n, n / 2);
    FUZZ_REQUIRE(cut <= n, "cut at %zu of %zu", cut, n);
    FUZZ_REQUIRE(pt_tokenizer_encode(t, text, cut, &parts) == PT_OK &&
                     pt_tokenizer_encode(t, text + cut, n - cut, &parts) == PT_OK,
                 "encode: %s", pt_last_error());
    FUZZ_REQUIRE(same_ids(&parts, whole.ids, whole.n), "cutting at %zu of %zu changes the ids", cut,
                 n);
    free(whole.ids);
    free(parts.ids);
    pt_tokenizer_destroy(t);
    return 0;
}
