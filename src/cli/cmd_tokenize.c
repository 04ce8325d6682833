/* cmd_tokenize.c: `pipetrain tokenize`: text files and directories into an
 * llm.c token file with a byte-level BPE tokenizer, or (--decode) token
 * files back into text.
 *
 * The files are the training text's (io/text_data.h's listing: a folder
 * gives its regular, non-hidden files without NUL bytes, in byte order of
 * name; a file reached twice is read once). Each file is a document and is
 * read in blocks, cut where the tokenizer says encoding the parts one after
 * the other gives the ids of the whole (pt_tokenizer_cut), so memory stays
 * bounded whatever the size of a file. A progress line goes to stderr when
 * the input is large: redrawn in place on a terminal, a line every few
 * seconds otherwise. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "cli/flags.h"
#include "io/text_data.h"
#include "text/text_tokens.h"
#include "pipetrain.h"

enum {
    BLOCK = 4 << 20,             /* bytes read at a time */
    LARGE_INPUT = 16 << 20,      /* inputs from this size show progress */
    PLAIN_PROGRESS_SECONDS = 10, /* between progress lines off a terminal */
};

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct {
    int show, tty;
    uint64_t done, total;
    double start, last;
} progress;

static void progress_draw(progress *p, int final)
{
    if (!p->show)
        return;
    double t = now();
    if (!final && t - p->last < (p->tty ? 0.2 : PLAIN_PROGRESS_SECONDS))
        return;
    p->last = t;
    double mb = (double)p->done / 1e6, rate = mb / (t - p->start > 1e-9 ? t - p->start : 1e-9);
    fprintf(stderr, "%stokenize: %.1f / %.1f MB (%.0f%%), %.1f MB/s%s", p->tty ? "\r" : "", mb,
            (double)p->total / 1e6, p->total ? 100.0 * (double)p->done / (double)p->total : 100.0,
            rate, p->tty && !final ? "" : "\n");
    fflush(stderr);
}

/* 1 if the file holds a NUL byte (a binary, which a folder does not give),
 * 0 if not, -1 if it cannot be read. */
static int holds_nul(const char *path, unsigned char *buf)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    size_t got;
    int nul = 0;
    while (!nul && (got = fread(buf, 1, BLOCK, f)) > 0)
        nul = memchr(buf, 0, got) != NULL;
    int bad = ferror(f);
    fclose(f);
    return bad ? -1 : nul;
}

typedef struct {
    pt_tokenizer *tok;
    pt_token_writer *out;
    pt_token_ids ids;
    unsigned char *buf;
    size_t cap;
    progress *progress;
    int documents;
    uint64_t tokens;
} encoder;

/* Encodes buf[0..n) and writes its ids. */
static int encode_part(encoder *e, size_t n)
{
    e->ids.n = 0;
    int rc = pt_tokenizer_encode(e->tok, (const char *)e->buf, n, &e->ids);
    if (rc == PT_OK)
        rc = pt_token_writer_add(e->out, e->ids.ids, e->ids.n);
    e->tokens += e->ids.n;
    e->progress->done += n;
    progress_draw(e->progress, 0);
    return rc;
}

/* One document: its <|endoftext|>, then its text block by block. */
static int encode_file(encoder *e, const pt_text_file *file)
{
    if (file->in_folder) {
        int nul = holds_nul(file->path, e->buf);
        if (nul < 0) {
            fprintf(stderr, "pipetrain tokenize: %s: %s\n", file->path, strerror(errno));
            return 1;
        }
        if (nul) {
            e->progress->done += file->size;
            return 0;
        }
    }
    FILE *f = fopen(file->path, "rb");
    if (!f) {
        fprintf(stderr, "pipetrain tokenize: %s: %s\n", file->path, strerror(errno));
        return 1;
    }
    size_t have = 0;
    int rc = PT_OK, eof = 0, started = 0;
    while (rc == PT_OK && !eof) {
        if (e->cap - have < BLOCK) {
            unsigned char *b = realloc(e->buf, e->cap * 2);
            if (!b) {
                rc = PT_ENOMEM;
                fprintf(stderr, "pipetrain tokenize: %s: out of memory for a line of %zu bytes\n",
                        file->path, have);
                break;
            }
            e->buf = b;
            e->cap *= 2;
        }
        size_t got = fread(e->buf + have, 1, BLOCK, f);
        have += got;
        eof = got < BLOCK;
        if (!started && have > 0) {
            int eot = pt_tokenizer_endoftext(e->tok);
            uint32_t id = (uint32_t)eot;
            rc = eot >= 0 ? pt_token_writer_add(e->out, &id, 1) : PT_OK;
            e->tokens += eot >= 0;
            e->documents++;
            started = 1;
        }
        /* encode up to a cut in the last quarter; a text without one
         * (a file of one line) is read further */
        size_t cut =
            eof ? have : pt_tokenizer_cut(e->tok, (const char *)e->buf, have, have / 4 * 3);
        if (rc == PT_OK && cut > 0 && (eof || cut < have)) {
            rc = encode_part(e, cut);
            memmove(e->buf, e->buf + cut, have - cut);
            have -= cut;
        }
    }
    if (ferror(f)) {
        fprintf(stderr, "pipetrain tokenize: %s: read failed\n", file->path);
        fclose(f);
        return 1;
    }
    fclose(f);
    if (rc != PT_OK && rc != PT_ENOMEM) {
        fprintf(stderr, "pipetrain tokenize: %s\n", pt_last_error());
        return rc == PT_EINVAL ? 2 : 1;
    }
    return rc == PT_OK ? 0 : 1;
}

/* OUT, unless it is one of the inputs. */
static int output_is_input(const char *out, const pt_text_file *files, size_t n)
{
    struct stat o, i;
    if (stat(out, &o) != 0)
        return 0;
    for (size_t k = 0; k < n; k++)
        if (stat(files[k].path, &i) == 0 && i.st_dev == o.st_dev && i.st_ino == o.st_ino)
            return 1;
    return 0;
}

static int tokenize(pt_tokenizer *tok, const char *const *paths, int n_paths, const char *out,
                    int quiet)
{
    pt_text_file *files;
    size_t n_files;
    if (pt_text_files_list(paths, n_paths, &files, &n_files) != PT_OK) {
        fprintf(stderr, "pipetrain tokenize: %s\n", pt_last_error());
        return 1;
    }
    if (output_is_input(out, files, n_files)) {
        fprintf(stderr, "pipetrain tokenize: -o %s is one of the inputs\n", out);
        pt_text_files_free(files, n_files);
        return 2;
    }
    progress p = {.tty = isatty(fileno(stderr)), .start = now()};
    p.last = p.start;
    for (size_t i = 0; i < n_files; i++)
        p.total += files[i].size;
    p.show = !quiet && p.total >= LARGE_INPUT;
    encoder e = {.tok = tok, .cap = 2 * BLOCK, .progress = &p};
    int rc = (e.buf = malloc(e.cap)) ? PT_OK : PT_ENOMEM;
    if (rc == PT_OK)
        rc = pt_token_writer_open(out, pt_tokenizer_vocab_size(tok), &e.out);
    if (rc != PT_OK) {
        fprintf(stderr, "pipetrain tokenize: %s\n",
                rc == PT_ENOMEM ? "out of memory" : pt_last_error());
        free(e.buf);
        pt_text_files_free(files, n_files);
        return 1;
    }
    int status = 0;
    for (size_t i = 0; i < n_files && !status; i++)
        status = encode_file(&e, &files[i]);
    if (!status && e.documents == 0) {
        pt_text_none_found(paths, n_paths);
        fprintf(stderr, "pipetrain tokenize: %s\n", pt_last_error());
        status = 2;
    }
    p.done = p.total;
    if (!status)
        progress_draw(&p, 1);
    if (status) {
        pt_token_writer_abort(e.out);
    } else if (pt_token_writer_commit(e.out) != PT_OK) {
        fprintf(stderr, "pipetrain tokenize: %s\n", pt_last_error());
        status = 1;
    } else {
        double seconds = now() - p.start;
        printf("wrote %s: %llu tokens from %d documents (%.1f MB, %.1f MB/s)\n", out,
               (unsigned long long)e.tokens, e.documents, (double)p.total / 1e6,
               (double)p.total / 1e6 / (seconds > 0 ? seconds : 1));
    }
    free(e.ids.ids);
    free(e.buf);
    pt_text_files_free(files, n_files);
    return status;
}

/* --decode: each token file's text on stdout. */
static int decode(pt_tokenizer *tok, const char *const *paths, int n_paths)
{
    for (int i = 0; i < n_paths; i++) {
        uint32_t *ids;
        size_t n;
        if (pt_token_file_read(paths[i], pt_tokenizer_vocab_size(tok), &ids, &n) != PT_OK) {
            fprintf(stderr, "pipetrain tokenize: %s\n", pt_last_error());
            return 1;
        }
        for (size_t k = 0; k < n; k++) {
            size_t len;
            const char *bytes = pt_tokenizer_token(tok, ids[k], &len);
            if (!bytes) {
                fprintf(
                    stderr,
                    "pipetrain tokenize: %s: token %zu is %u, which the tokenizer does not have\n",
                    paths[i], k, ids[k]);
                free(ids);
                return 1;
            }
            fwrite(bytes, 1, len, stdout);
        }
        free(ids);
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        fprintf(stderr, "pipetrain tokenize: writing the text failed: %s\n", strerror(errno));
        return 1;
    }
    return 0;
}

static const char summary[] =
    "Encodes text with a byte-level BPE tokenizer (GPT-2's: tokenizer.json, or vocab.json\n"
    "and merges.txt) into an llm.c token file, which `pipetrain train --data OUT.bin` reads.\n"
    "FILES|DIRS are read as training text is: a folder gives its regular, non-hidden\n"
    "files without NUL bytes, in byte order of name; a file reached twice is read once.\n"
    "Each file is a document: when the tokenizer has <|endoftext|>, that token goes\n"
    "before every document (as llm.c's and nanoGPT's preparers join them); without it\n"
    "the documents follow each other. The file has a 1024-byte header (magic 20240520,\n"
    "version 1 and uint16 tokens for a vocabulary of at most 65536, else version 2 and\n"
    "uint32 tokens) and is written atomically. With --decode, FILES are token files and\n"
    "their text goes to stdout.";

int cmd_tokenize(int argc, char **argv)
{
    const char *tokenizer = NULL, *out = NULL;
    int decode_mode = 0, quiet = 0;
    flag flags[] = {
        FLAG("tokenizer", FLAG_STRING, &tokenizer, "PATH",
             "tokenizer.json, or a folder holding it or vocab.json and merges.txt (required)"),
        FLAG_ALIAS("output", 'o', &out, "OUT.bin",
                   "the token file to write (default: the first input's name + .bin, here)"),
        FLAG("decode", FLAG_BOOL, &decode_mode, NULL,
             "the inputs are token files: write their text to stdout"),
        FLAG("quiet", FLAG_BOOL, &quiet, NULL, "no progress line"),
    };
    int n = (int)(sizeof flags / sizeof flags[0]), n_paths = 0;
    const char **paths = malloc(sizeof *paths * (size_t)argc);
    if (!paths)
        return 1;
    int rc = flags_parse_args("tokenize", summary, flags, n, argc, argv, "FILES|DIRS...", paths,
                              &n_paths);
    if (rc) {
        free(paths);
        return rc == 1 ? 0 : 2;
    }
    const char *problem = !tokenizer ? "--tokenizer PATH is required"
                          : !n_paths ? "give the text files or folders to encode"
                                     : NULL;
    static const char *const encode_only[] = {"output", "quiet", NULL};
    if (problem || (decode_mode && flags_refuse_given("tokenize", flags, n, encode_only,
                                                      "with --decode (the text goes to stdout)"))) {
        if (problem)
            fprintf(stderr, "pipetrain tokenize: %s (see pipetrain tokenize --help)\n", problem);
        free(paths);
        return 2;
    }
    pt_tokenizer *tok;
    if (pt_tokenizer_load(tokenizer, &tok) != PT_OK) {
        fprintf(stderr, "pipetrain tokenize: %s\n", pt_last_error());
        free(paths);
        return 1;
    }
    char *default_out = NULL;
    if (!decode_mode && !out) {
        const char *first = paths[0];
        size_t len = strlen(first);
        while (len > 1 && first[len - 1] == '/')
            len--;
        const char *base = first + len;
        while (base > first && base[-1] != '/')
            base--;
        default_out = malloc((size_t)(first + len - base) + 5);
        if (default_out)
            sprintf(default_out, "%.*s.bin", (int)(first + len - base), base);
        out = default_out;
    }
    rc = decode_mode ? decode(tok, paths, n_paths)
         : out       ? tokenize(tok, paths, n_paths, out, quiet)
                     : 1;
    free(default_out);
    pt_tokenizer_destroy(tok);
    free(paths);
    return rc;
}
