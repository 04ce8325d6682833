/* fuzz_text_corpus: byte-level text corpora (src/io/text_corpus.c). The
 * input is written twice: as a file named on its own, and as a file in a
 * folder, which pt_text_data_load() reads by the folder rules (a file
 * holding a NUL byte is skipped as binary). Both are loaded with a
 * validation fraction taken from the first byte; what is read must be the
 * input's bytes, split head to training and tail to validation. */
#include <stdlib.h>
#include <string.h>

#include "io/text_data.h"

#include "harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[4096], folder[4096], inner[8192];
    double fraction = size ? data[0] / 256.0 : 0.1;
    fuzz_write("corpus.txt", data, size, path, sizeof path);
    snprintf(folder, sizeof folder, "%s/texts", fuzz_dir());
    mkdir(folder, 0700);
    snprintf(inner, sizeof inner, "%s/a.txt", folder);
    FILE *f = fopen(inner, "wb");
    FUZZ_REQUIRE(f && (!size || fwrite(data, 1, size, f) == size) && !fclose(f), "write %s", inner);

    const char *alone[1] = {path}, *both[2] = {path, folder};
    pt_token_data d;
    if (pt_text_data_load(alone, 1, fraction, &d) == PT_OK) {
        FUZZ_REQUIRE(d.n_train + d.n_val == size && d.vocab == 256, "read %zu + %zu of %zu bytes",
                     d.n_train, d.n_val, size);
        for (size_t i = 0; i < d.n_train; i++)
            FUZZ_REQUIRE(d.train[i] == data[i], "training byte %zu differs", i);
        for (size_t i = 0; i < d.n_val; i++)
            FUZZ_REQUIRE(d.val[i] == data[d.n_train + i], "validation byte %zu differs", i);
        pt_token_data_free(&d);
    } else {
        FUZZ_REQUIRE(size == 0 || (size_t)(size * fraction) == size, "refused %zu bytes: %s", size,
                     pt_last_error());
    }
    /* the folder's copy is skipped when binary; the file named alone is not */
    if (pt_text_data_load(both, 2, fraction, &d) == PT_OK) {
        size_t want = memchr(data, 0, size) ? size : 2 * size;
        FUZZ_REQUIRE(d.n_train + d.n_val == want, "read %zu + %zu bytes, expected %zu", d.n_train,
                     d.n_val, want);
        pt_token_data_free(&d);
    }
    unlink(inner);
    return 0;
}
