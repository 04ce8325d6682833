/* test_tensorboard_records: the event file's framing is TensorFlow's. CRC-32C
 * matches the published check values (RFC 3720's and the "123456789" one);
 * a record's header holds its length and the masked CRC of those 8 bytes,
 * its footer the masked CRC of the data; a file pt_tb_open writes starts
 * with one such record holding the file_version event "brain.Event:2", and
 * every record after it is framed the same way. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/tensorboard.h"
#include "pipetrain.h"

#include "check.h"

static uint64_t get_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = bytes - 1; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static void check_crc32c(void)
{
    uint8_t zeros[32] = {0}, ones[32], up[32];
    memset(ones, 0xff, sizeof ones);
    for (int i = 0; i < 32; i++)
        up[i] = (uint8_t)i;
    CHECK(pt_crc32c("123456789", 9) == 0xE3069283u, "crc32c(123456789) = %08x",
          pt_crc32c("123456789", 9));
    CHECK(pt_crc32c(zeros, 32) == 0x8A9136AAu, "crc32c(32 zeros) = %08x", pt_crc32c(zeros, 32));
    CHECK(pt_crc32c(ones, 32) == 0x62A8AB43u, "crc32c(32 x ff) = %08x", pt_crc32c(ones, 32));
    CHECK(pt_crc32c(up, 32) == 0x46DD794Eu, "crc32c(0..31) = %08x", pt_crc32c(up, 32));
    CHECK(pt_crc32c("", 0) == 0, "crc32c of nothing = %08x", pt_crc32c("", 0));
    uint32_t c = pt_crc32c("123456789", 9);
    CHECK(pt_crc32c_masked("123456789", 9) == ((c >> 15 | c << 17) + 0xa282ead8u), "masked crc");
}

static void check_frame(void)
{
    const char data[] = "hello, tensorboard";
    uint8_t header[12], footer[4];
    pt_tfrecord_frame(data, 18, header, footer);
    CHECK(get_le(header, 8) == 18, "length %llu", (unsigned long long)get_le(header, 8));
    CHECK(get_le(header + 8, 4) == pt_crc32c_masked(header, 8), "header crc");
    CHECK(get_le(footer, 4) == pt_crc32c_masked(data, 18), "footer crc");
}

/* Reads the file's records; returns how many, -1 if one is torn or its CRC
 * is wrong. The first record's bytes go to first (n_first bytes). */
static int read_records(const char *path, uint8_t *first, size_t *n_first)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    int count = 0;
    uint8_t header[12], footer[4];
    while (fread(header, 1, 12, f) == 12) {
        uint64_t n = get_le(header, 8);
        uint8_t *data = malloc(n ? n : 1);
        int ok = data && get_le(header + 8, 4) == pt_crc32c_masked(header, 8) &&
                 fread(data, 1, n, f) == n && fread(footer, 1, 4, f) == 4 &&
                 get_le(footer, 4) == pt_crc32c_masked(data, n);
        if (ok && count == 0 && n <= *n_first) {
            memcpy(first, data, n);
            *n_first = n;
        }
        free(data);
        if (!ok) {
            fclose(f);
            return -1;
        }
        count++;
    }
    fclose(f);
    return count;
}

static int check_file(void)
{
    char dir[] = "/tmp/pt_tb_XXXXXX";
    REQUIRE(mkdtemp(dir), "mkdtemp");
    char sub[600];
    snprintf(sub, sizeof sub, "%s/a/b", dir);
    pt_tb_writer *w;
    REQUIRE(pt_tb_open(sub, &w) == PT_OK, "open: %s", pt_last_error());
    char path[512];
    snprintf(path, sizeof path, "%s", pt_tb_path(w));
    CHECK(strstr(path, "/a/b/events.out.tfevents.") && strstr(path, ".pipetrain"), "name %s", path);
    CHECK(pt_tb_scalar(w, "train/loss", 1, 2.5f) == PT_OK, "scalar");
    CHECK(pt_tb_text(w, "config", 0, "--steps 3") == PT_OK, "text");
    CHECK(pt_tb_restart(w, 2) == PT_OK, "restart");
    CHECK(pt_tb_close(w) == PT_OK, "close");
    uint8_t first[256];
    size_t n_first = sizeof first;
    CHECK(read_records(path, first, &n_first) == 4, "records in %s", path);
    /* wall_time (key 0x09, 8 bytes), step 0 (0x10 0x00), file_version (0x1a) */
    static const char version[] = "brain.Event:2";
    CHECK(n_first == 9 + 2 + 2 + 13 && first[0] == 0x09 && first[9] == 0x10 && first[10] == 0 &&
              first[11] == 0x1a && first[12] == 13 && !memcmp(first + 13, version, 13),
          "the first event is not file_version %s", version);
    /* a second writer in the same folder names a later file */
    REQUIRE(pt_tb_open(sub, &w) == PT_OK, "reopen: %s", pt_last_error());
    CHECK(strcmp(pt_tb_path(w), path) > 0, "%s does not sort after %s", pt_tb_path(w), path);
    unlink(pt_tb_path(w));
    pt_tb_close(w);
    unlink(path);
    /* a file where the folder should be is refused with a message */
    FILE *f = fopen(path, "w");
    fclose(f);
    snprintf(sub, sizeof sub, "%.512s/x", path);
    CHECK(pt_tb_open(sub, &w) == PT_EIO && strstr(pt_last_error(), "cannot make the folder"),
          "a file as the folder: %s", pt_last_error());
    unlink(path);
    snprintf(sub, sizeof sub, "rm -rf %s", dir);
    return system(sub);
}

int main(void)
{
    check_crc32c();
    check_frame();
    check_file();
    return failures != 0;
}
