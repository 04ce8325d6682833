/* fuzz_tokens: pre-tokenized corpora (src/io/token_file.c): llm.c's format
 * (a 1024-byte header of int32s: magic 20240520, version, token count; then
 * uint16 tokens, or uint32 for version 2) and nanoGPT's headerless uint16
 * .bin. The input is written as a file and read with pt_token_file_read() under a vocabulary size
 * taken from the input's last byte (so both the accepting and the refusing path of the token check
 * are reached), then loaded as a training file with pt_token_data_load_files(), which splits off a
 * validation tail. What is accepted must hold the tokens the file holds, every one below the
 * vocabulary. */
#include <stdlib.h>
#include <string.h>

#include "io/text_data.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096];
    int vocab = size ? 1 + data[size - 1] * 257 : 1;
    uint32_t *tokens = NULL;
    size_t n = 0;
    fuzz_write("tokens.bin", data, size, path, sizeof path);
    if (pt_token_file_read(path, vocab, &tokens, &n) == PT_OK) {
        /* llm.c's version 2 holds uint32 tokens, the others uint16 */
        static const uint8_t v2[8] = {0x88, 0xD8, 0x34, 0x01, 2, 0, 0, 0}; /* 20240520, 2 */
        size_t width = size >= 8 && !memcmp(data, v2, 8) ? 4 : 2;
        FUZZ_REQUIRE(n > 0 && width * n <= size, "%zu tokens from a %zu-byte file", n, size);
        const uint8_t *body = data + (size - width * n);
        for (size_t i = 0; i < n; i++) {
            const uint8_t *p = body + width * i;
            uint32_t want =
                p[0] | p[1] << 8 | (width == 4 ? (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24 : 0);
            FUZZ_REQUIRE(tokens[i] < (uint32_t)vocab, "token %zu is %u, vocab %d", i, tokens[i],
                         vocab);
            FUZZ_REQUIRE(tokens[i] == want, "token %zu is not the file's", i);
        }
        free(tokens);
    } else {
        FUZZ_REQUIRE(!tokens && !n, "a refused file left tokens behind");
    }
    pt_token_data d;
    if (pt_token_data_load_files(path, NULL, vocab, 0.25, &d) == PT_OK) {
        FUZZ_REQUIRE(d.n_train + d.n_val > 0 && 2 * (d.n_train + d.n_val) <= size,
                     "split holds %zu + %zu tokens", d.n_train, d.n_val);
        pt_token_data_free(&d);
    }
    return 0;
}
