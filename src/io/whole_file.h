/* whole_file.h: reading a file whole into memory, for the readers of small
 * and medium files: text corpora (text_corpus.c) and tokenizer files
 * (src/text/tokenizer_load.c). */
#ifndef PT_IO_WHOLE_FILE_H
#define PT_IO_WHOLE_FILE_H

#include "pipetrain.h"

#include <stddef.h>

/* The bytes of path into *out (malloc'ed, with a NUL after the last byte,
 * which *n does not count). PT_EIO naming the path and the system's reason
 * when it cannot be read; PT_ENOMEM. */
int pt_read_whole_file(const char *path, unsigned char **out, size_t *n);

#endif
