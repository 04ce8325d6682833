/* whole_file.c: reading a file whole (see whole_file.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/whole_file.h"
#include "tensor/error.h"

int pt_read_whole_file(const char *path, unsigned char **out, size_t *out_n)
{
    *out = NULL;
    *out_n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
    unsigned char *data = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n + 1 >= cap) {
            size_t ncap = cap ? cap * 2 : 65536;
            unsigned char *d = realloc(data, ncap);
            if (!d) {
                free(data);
                fclose(f);
                return pt_fail(PT_ENOMEM, "%s: out of memory", path);
            }
            data = d;
            cap = ncap;
        }
        size_t got = fread(data + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) {
        free(data);
        return pt_fail(PT_EIO, "%s: read failed", path);
    }
    data[n] = 0;
    *out = data;
    *out_n = n;
    return PT_OK;
}
