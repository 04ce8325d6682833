/* output_file.c: see output_file.h. The file is opened without blocking
 * (a pipe with no reader fails at once) and checked with fstat before the
 * first byte is written; truncation happens only once it is known to be a
 * regular file. */
#include "tensor/output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tensor/error.h"

FILE *pt_open_output(const char *path, const char *mode)
{
    int append = mode[0] == 'a';
    int fd =
        open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : 0), 0666);
    if (fd < 0) {
        if (errno == ENXIO)
            pt_fail(PT_EINVAL,
                    "%s is a pipe that nobody reads: only a regular file (or a new "
                    "name) is written",
                    path);
        else
            pt_fail(PT_EIO, "cannot write %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        pt_fail(PT_EINVAL, "%s is %s: only a regular file (or a new name) is written", path,
                dir ? "a folder" : "not a regular file (a device or a pipe)");
        return NULL;
    }
    /* back to blocking writes, and truncated now that it is a plain file */
    int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0 ||
        (!append && ftruncate(fd, 0) != 0)) {
        pt_fail(PT_EIO, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    FILE *f = fdopen(fd, append ? "ab" : "wb");
    if (!f) {
        pt_fail(PT_EIO, "cannot write %s: %s", path, strerror(errno));
        close(fd);
    }
    return f;
}
