/* output_file.h: opening a file a command writes in place (a trace, a
 * metrics log, a drawing): only a regular file, or a name that does not
 * exist yet. A device, folder or pipe under the name is refused with a
 * message naming it, and a pipe nobody reads is refused instead of waiting
 * forever. Files that must never be seen half-written go through
 * io/atomic_file.h instead. It lives in the base layer because every layer
 * that writes a user's file (runtime traces, io logs, cli drawings) needs it. */
#ifndef PT_TENSOR_OUTPUT_FILE_H
#define PT_TENSOR_OUTPUT_FILE_H

#include <stdio.h>

/* mode "w" (truncate) or "a" (append); NULL with pt_last_error() set when
 * the path is refused or cannot be opened. */
FILE *pt_open_output(const char *path, const char *mode);

#endif
