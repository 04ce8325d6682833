/* tokenizer_load.c: pt_tokenizer_load(), a byte-level BPE tokenizer from
 * Hugging Face's files:
 *  - tokenizer.json: model.vocab ({token: id}), model.merges ("a b" strings
 *    or [a, b] pairs, in rank order), added_tokens, and the pipeline around
 *    the model, which must be GPT-2's (no normalizer, the ByteLevel
 *    pre-tokenizer and decoder); anything else is refused, not ignored.
 *  - vocab.json and merges.txt (GPT-2's original pair): the merges one per
 *    line as "a b", a "#version" line skipped; <|endoftext|>, when the
 *    vocabulary has it, is a special added token, as transformers'
 *    GPT2Tokenizer makes it.
 * Token strings spell bytes with byte_level.h's characters; every token is
 * stored as the bytes it stands for, which the encoder and decoder use.
 * A malformed file is refused naming the file and the problem. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "io/json.h"
#include "io/whole_file.h"
#include "tensor/error.h"
#include "text/byte_level.h"
#include "text/tokenizer.h"

/* Ids past this are refused: the largest vocabulary a model trains. */
#define MAX_IDS (1u << 24)

typedef struct {
    pt_tokenizer *t;
    const char *file;   /* for messages */
    pt_bytes_map ids;   /* token string (UTF-8) -> id */
    size_t vocab_count; /* tokens in the model's vocabulary */
} loader;

static int lookup(loader *l, const char *s, size_t n, uint32_t *id)
{
    const uint64_t *v = pt_bytes_map_find(&l->ids, (const unsigned char *)s, n,
                                          pt_bytes_hash((const unsigned char *)s, n));
    if (v)
        *id = (uint32_t)*v;
    return v != NULL;
}

/* Makes ids 0..n-1 decodable (new ones: no token yet). */
static int grow_ids(pt_tokenizer *t, uint32_t n)
{
    if (n <= t->n_ids)
        return PT_OK;
    uint64_t *p = realloc(t->piece, n * sizeof *p);
    if (!p)
        return pt_fail(PT_ENOMEM, "out of memory for %u token ids", n);
    for (uint32_t i = t->n_ids; i < n; i++)
        p[i] = PT_NO_TOKEN;
    t->piece = p;
    t->n_ids = n;
    return PT_OK;
}

/* Records the bytes id decodes to (none for an empty token, whose place
 * must still be a real address: a null one means no token). */
static int set_piece(pt_tokenizer *t, uint32_t id, const unsigned char *b, size_t n)
{
    if (!t->bytes || t->bytes_n + n > t->bytes_cap) {
        size_t cap = t->bytes_cap ? t->bytes_cap * 2 : 1 << 16;
        while (cap < t->bytes_n + n)
            cap *= 2;
        unsigned char *bytes = realloc(t->bytes, cap);
        if (!bytes)
            return pt_fail(PT_ENOMEM, "out of memory for the vocabulary");
        t->bytes = bytes;
        t->bytes_cap = cap;
    }
    if (n)
        memcpy(t->bytes + t->bytes_n, b, n);
    t->piece[id] = (uint64_t)t->bytes_n << 32 | n;
    t->bytes_n += n;
    return PT_OK;
}

static int check_id(loader *l, const char *where, const pt_json *v, uint32_t *id)
{
    *id = 0;
    if (!v || v->type != PT_JSON_NUMBER || !v->is_uint || v->uint_value >= MAX_IDS)
        return pt_fail(PT_EFORMAT, "%s: %s: an id must be an integer in [0, %u)", l->file, where,
                       MAX_IDS);
    *id = (uint32_t)v->uint_value;
    return PT_OK;
}

/* The vocabulary: every token's id, and the bytes it stands for. */
static int read_vocab(loader *l, const pt_json *vocab, const char *where)
{
    pt_tokenizer *t = l->t;
    if (!vocab || vocab->type != PT_JSON_OBJECT || vocab->n == 0)
        return pt_fail(PT_EFORMAT, "%s: %s must be a non-empty object of token: id", l->file,
                       where);
    uint32_t max = 0;
    for (size_t i = 0; i < vocab->n; i++) {
        const pt_json *v = vocab->items[i];
        if (v->type != PT_JSON_NUMBER || !v->is_uint || v->uint_value >= MAX_IDS)
            return pt_fail(PT_EFORMAT, "%s: %s: the id of \"%.60s\" must be an integer in [0, %u)",
                           l->file, where, vocab->keys[i], MAX_IDS);
        max = (uint32_t)v->uint_value > max ? (uint32_t)v->uint_value : max;
    }
    l->vocab_count = vocab->n;
    int rc = grow_ids(t, max + 1);
    unsigned char *buf = NULL;
    size_t buf_cap = 0;
    for (size_t i = 0; i < vocab->n && rc == PT_OK; i++) {
        const char *key = vocab->keys[i];
        size_t len = strlen(key);
        uint32_t id = (uint32_t)vocab->items[i]->uint_value;
        if (t->piece[id] != PT_NO_TOKEN) {
            rc = pt_fail(PT_EFORMAT, "%s: %s: id %u is given to two tokens (\"%.60s\" is one)",
                         l->file, where, id, key);
            break;
        }
        if (len + 1 > buf_cap) {
            unsigned char *b = realloc(buf, buf_cap = 2 * len + 64);
            if (!b) {
                rc = pt_fail(PT_ENOMEM, "out of memory for the vocabulary");
                break;
            }
            buf = b;
        }
        long k = pt_byte_level_unspell(key, len, buf);
        rc = k >= 0 ? set_piece(t, id, buf, (size_t)k)
                    : set_piece(t, id, (const unsigned char *)key, len);
        if (rc == PT_OK &&
            pt_bytes_map_put(&l->ids, (const unsigned char *)key, len,
                             pt_bytes_hash((const unsigned char *)key, len), id) != 0)
            rc = pt_fail(PT_ENOMEM, "out of memory for the vocabulary");
        if (rc == PT_OK && t->bpe.ignore_merges && k >= 0 &&
            pt_bytes_map_put(&t->bpe.whole, buf, (size_t)k, pt_bytes_hash(buf, (size_t)k), id) != 0)
            rc = pt_fail(PT_ENOMEM, "out of memory for the vocabulary");
    }
    free(buf);
    return rc;
}

/* One merge of rank `rank`: a and b and their concatenation must be
 * tokens. `where` names it in messages ("line 7", "model.merges[5]"). */
static int add_merge(loader *l, const char *a, size_t na, const char *b, size_t nb, uint32_t rank,
                     const char *where)
{
    uint32_t ia, ib, ij;
    char *joined = malloc(na + nb + 1);
    if (!joined)
        return pt_fail(PT_ENOMEM, "out of memory for the merges");
    memcpy(joined, a, na);
    memcpy(joined + na, b, nb);
    const char *missing = !lookup(l, a, na, &ia)             ? a
                          : !lookup(l, b, nb, &ib)           ? b
                          : !lookup(l, joined, na + nb, &ij) ? joined
                                                             : NULL;
    int len = missing == a ? (int)na : missing == b ? (int)nb : (int)(na + nb);
    int rc = missing ? pt_fail(PT_EFORMAT,
                               "%s: %s: merge \"%.*s %.*s\": \"%.*s\" is not in the "
                               "vocabulary",
                               l->file, where, (int)na, a, (int)nb, b, len, missing)
                     : PT_OK;
    free(joined);
    if (rc == PT_OK && pt_bpe_merges_put(&l->t->bpe.merges, ia, ib, rank, ij) != 0)
        rc = pt_fail(PT_ENOMEM, "out of memory for the merges");
    return rc;
}

/* merges.txt: "a b" per line; "#version" lines skipped; rank counts the
 * other lines from 0. */
static int read_merges_txt(loader *l, const char *text, size_t n)
{
    uint32_t rank = 0;
    size_t line = 0;
    for (size_t at = 0; at < n;) {
        const char *s = text + at, *nl = memchr(s, '\n', n - at);
        size_t len = nl ? (size_t)(nl - s) : n - at;
        at += len + (nl != NULL);
        line++;
        if (len && s[len - 1] == '\r')
            len--;
        if (len >= 8 && !memcmp(s, "#version", 8))
            continue;
        const char *space = memchr(s, ' ', len);
        if (!space || memchr(space + 1, ' ', len - (size_t)(space + 1 - s)))
            return pt_fail(PT_EFORMAT,
                           "%s: line %zu: a merge is two tokens separated by one space, not "
                           "\"%.*s\"",
                           l->file, line, (int)(len < 80 ? len : 80), s);
        char where[32];
        snprintf(where, sizeof where, "line %zu", line);
        int rc = add_merge(l, s, (size_t)(space - s), space + 1, len - (size_t)(space - s) - 1,
                           rank++, where);
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

/* tokenizer.json's model.merges: "a b" strings or [a, b] pairs. */
static int read_merges_json(loader *l, const pt_json *merges)
{
    if (!merges || merges->type != PT_JSON_ARRAY)
        return pt_fail(PT_EFORMAT, "%s: model.merges must be an array", l->file);
    for (size_t i = 0; i < merges->n; i++) {
        const pt_json *m = merges->items[i];
        char where[48];
        snprintf(where, sizeof where, "model.merges[%zu]", i);
        const char *a = NULL, *b = NULL;
        size_t na = 0, nb = 0;
        if (m->type == PT_JSON_STRING) {
            const char *space = memchr(m->string, ' ', m->len);
            if (space && !memchr(space + 1, ' ', m->len - (size_t)(space + 1 - m->string))) {
                a = m->string, na = (size_t)(space - m->string);
                b = space + 1, nb = m->len - na - 1;
            }
        } else if (m->type == PT_JSON_ARRAY && m->n == 2 && m->items[0]->type == PT_JSON_STRING &&
                   m->items[1]->type == PT_JSON_STRING) {
            a = m->items[0]->string, na = m->items[0]->len;
            b = m->items[1]->string, nb = m->items[1]->len;
        }
        if (!a)
            return pt_fail(PT_EFORMAT,
                           "%s: %s: a merge is a string \"a b\" (one space) or a pair [\"a\", "
                           "\"b\"]",
                           l->file, where);
        int rc = add_merge(l, a, na, b, nb, (uint32_t)i, where);
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

/* The symbol each byte starts as: its byte-level character's token, else
 * with byte_fallback the token "<0xHH>", else none (unk or dropped). */
static void byte_symbols(loader *l, int byte_fallback)
{
    for (int b = 0; b < 256; b++) {
        char s[8];
        uint32_t id;
        int n = pt_byte_level_spell((unsigned char)b, s);
        l->t->bpe.byte_id[b] = lookup(l, s, (size_t)n, &id) ? (int32_t)id : -1;
        if (l->t->bpe.byte_id[b] < 0 && byte_fallback) {
            snprintf(s, sizeof s, "<0x%02X>", b);
            if (lookup(l, s, 6, &id))
                l->t->bpe.byte_id[b] = (int32_t)id;
        }
    }
}

static int add_token(pt_tokenizer *t, const char *content, size_t len, uint32_t id)
{
    pt_added_token *a = realloc(t->added, (t->n_added + 1) * sizeof *a);
    if (!a)
        return pt_fail(PT_ENOMEM, "out of memory for the added tokens");
    t->added = a;
    a += t->n_added;
    memset(a, 0, sizeof *a);
    if (!(a->content = malloc(len)))
        return pt_fail(PT_ENOMEM, "out of memory for the added tokens");
    memcpy(a->content, content, len);
    a->len = len;
    a->id = id;
    a->normalized = 1;
    t->n_added++;
    int rc = grow_ids(t, id + 1);
    return rc == PT_OK ? set_piece(t, id, (const unsigned char *)content, len) : rc;
}

static int flag(loader *l, const pt_json *o, const char *key, int dflt, const char *where, int *out)
{
    const pt_json *v = pt_json_get(o, key);
    if (!v || v->type == PT_JSON_NULL) {
        *out = dflt;
        return PT_OK;
    }
    if (v->type != PT_JSON_BOOL)
        return pt_fail(PT_EFORMAT, "%s: %s.%s must be true or false", l->file, where, key);
    *out = v->boolean;
    return PT_OK;
}

/* The id the tokenizers library gives an added token (AddedVocabulary::
 * add_tokens): the vocabulary's id for a token it has; otherwise one past
 * the largest added id when that is past the vocabulary, else the
 * vocabulary's size (its count of tokens). The id the file records is only
 * checked, as the library only warns about it. */
static uint32_t added_id(loader *l, const char *content, size_t len)
{
    uint32_t id = 0;
    if (lookup(l, content, len, &id))
        return id;
    uint32_t vocab = (uint32_t)l->vocab_count;
    if (l->t->n_added == 0)
        return vocab;
    uint32_t max = 0;
    for (size_t i = 0; i < l->t->n_added; i++)
        max = l->t->added[i].id > max ? l->t->added[i].id : max;
    return max >= vocab || vocab == 0 ? max + 1 : vocab;
}

static int known_added(const pt_tokenizer *t, const char *content, size_t len)
{
    for (size_t i = 0; i < t->n_added; i++)
        if (t->added[i].len == len && !memcmp(t->added[i].content, content, len))
            return 1;
    return 0;
}

static int read_added_token(loader *l, const pt_json *o, const char *where)
{
    if (o->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: %s must be an object", l->file, where);
    const pt_json *content = pt_json_get(o, "content");
    uint32_t id;
    int rc = check_id(l, where, pt_json_get(o, "id"), &id);
    if (rc == PT_OK && (!content || content->type != PT_JSON_STRING || content->len == 0))
        rc = pt_fail(PT_EFORMAT, "%s: %s.content must be a non-empty string", l->file, where);
    if (rc != PT_OK || known_added(l->t, content->string, content->len))
        return rc;
    id = added_id(l, content->string, content->len);
    if (id >= MAX_IDS)
        return pt_fail(PT_EFORMAT, "%s: %s: too many tokens (id %u)", l->file, where, id);
    if ((rc = add_token(l->t, content->string, content->len, id)) != PT_OK)
        return rc;
    pt_added_token *a = &l->t->added[l->t->n_added - 1];
    rc = flag(l, o, "single_word", 0, where, &a->single_word);
    if (rc == PT_OK)
        rc = flag(l, o, "lstrip", 0, where, &a->lstrip);
    if (rc == PT_OK)
        rc = flag(l, o, "rstrip", 0, where, &a->rstrip);
    if (rc == PT_OK)
        rc = flag(l, o, "special", 0, where, &a->special);
    /* AddedToken's own default: special tokens are not normalised */
    if (rc == PT_OK)
        rc = flag(l, o, "normalized", !a->special, where, &a->normalized);
    return rc;
}

static int read_added_tokens(loader *l, const pt_json *list)
{
    if (!list || list->type == PT_JSON_NULL)
        return PT_OK;
    if (list->type != PT_JSON_ARRAY)
        return pt_fail(PT_EFORMAT, "%s: added_tokens must be an array", l->file);
    for (size_t i = 0; i < list->n; i++) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        int rc = read_added_token(l, list->items[i], where);
        if (rc != PT_OK)
            return rc;
    }
    return PT_OK;
}

/* 1 if v is absent, null, or (for a string) empty. */
static int unset(const pt_json *v)
{
    return !v || v->type == PT_JSON_NULL || (v->type == PT_JSON_STRING && v->len == 0);
}

static const char *type_of(const pt_json *o)
{
    const pt_json *type = pt_json_get(o, "type");
    return type && type->type == PT_JSON_STRING ? type->string : "";
}

static int refuse(loader *l, const char *what, const char *value)
{
    return pt_fail(PT_EFORMAT,
                   "%s: %s%s%s is not supported: pipetrain implements GPT-2's byte-level BPE "
                   "(docs/tokenizer.md)",
                   l->file, what, *value ? " " : "", value);
}

/* The parts around the model: GPT-2's, or refused. */
static int read_pipeline(loader *l, const pt_json *root)
{
    const pt_json *norm = pt_json_get(root, "normalizer");
    if (!unset(norm) &&
        !(!strcmp(type_of(norm), "Sequence") && (norm = pt_json_get(norm, "normalizers")) &&
          norm->type == PT_JSON_ARRAY && norm->n == 0))
        return refuse(l, "normalizer", type_of(norm));
    const pt_json *pre = pt_json_get(root, "pre_tokenizer");
    if (pre && !strcmp(type_of(pre), "Sequence")) {
        const pt_json *list = pt_json_get(pre, "pretokenizers");
        pre = list && list->type == PT_JSON_ARRAY && list->n == 1 ? list->items[0] : NULL;
        if (!pre)
            return refuse(l, "pre_tokenizer", "Sequence of more than ByteLevel");
    }
    if (!pre || strcmp(type_of(pre), "ByteLevel"))
        return refuse(l, "pre_tokenizer", pre ? type_of(pre) : "null");
    int rc = flag(l, pre, "add_prefix_space", 1, "pre_tokenizer", &l->t->add_prefix_space);
    if (rc == PT_OK)
        rc = flag(l, pre, "use_regex", 1, "pre_tokenizer", &l->t->use_regex);
    if (rc != PT_OK)
        return rc;
    const pt_json *dec = pt_json_get(root, "decoder");
    if (!unset(dec) && strcmp(type_of(dec), "ByteLevel"))
        return refuse(l, "decoder", type_of(dec));
    const pt_json *post = pt_json_get(root, "post_processor");
    if (!unset(post) && strcmp(type_of(post), "ByteLevel"))
        return refuse(l, "post_processor", type_of(post));
    if (!unset(pt_json_get(root, "truncation")))
        return refuse(l, "truncation", "");
    return PT_OK;
}

static int read_model(loader *l, const pt_json *model)
{
    pt_tokenizer *t = l->t;
    if (!model || model->type != PT_JSON_OBJECT)
        return pt_fail(PT_EFORMAT, "%s: no model object", l->file);
    if (pt_json_get(model, "type") && strcmp(type_of(model), "BPE"))
        return refuse(l, "model", type_of(model));
    const pt_json *dropout = pt_json_get(model, "dropout");
    if (!unset(dropout) && !(dropout->type == PT_JSON_NUMBER && dropout->number == 0))
        return refuse(l, "model.dropout", "");
    if (!unset(pt_json_get(model, "continuing_subword_prefix")))
        return refuse(l, "model.continuing_subword_prefix", "");
    if (!unset(pt_json_get(model, "end_of_word_suffix")))
        return refuse(l, "model.end_of_word_suffix", "");
    int byte_fallback = 0;
    int rc = flag(l, model, "byte_fallback", 0, "model", &byte_fallback);
    if (rc == PT_OK)
        rc = flag(l, model, "fuse_unk", 0, "model", &t->bpe.fuse_unk);
    if (rc == PT_OK)
        rc = flag(l, model, "ignore_merges", 0, "model", &t->bpe.ignore_merges);
    if (rc == PT_OK)
        rc = read_vocab(l, pt_json_get(model, "vocab"), "model.vocab");
    if (rc == PT_OK)
        rc = read_merges_json(l, pt_json_get(model, "merges"));
    if (rc != PT_OK)
        return rc;
    byte_symbols(l, byte_fallback);
    const pt_json *unk = pt_json_get(model, "unk_token");
    t->bpe.unk = -1;
    if (!unset(unk)) {
        uint32_t id;
        if (unk->type != PT_JSON_STRING || !lookup(l, unk->string, unk->len, &id))
            return pt_fail(PT_EFORMAT, "%s: model.unk_token is not a token of model.vocab",
                           l->file);
        t->bpe.unk = (int32_t)id;
    }
    return PT_OK;
}

static int parse_json_file(const char *path, pt_json **root)
{
    unsigned char *text;
    size_t n;
    int rc = pt_read_whole_file(path, &text, &n);
    if (rc != PT_OK)
        return rc;
    rc = pt_json_parse((const char *)text, n, 0, path, root);
    free(text);
    if (rc == PT_OK && (*root)->type != PT_JSON_OBJECT) {
        pt_json_free(*root);
        *root = NULL;
        rc = pt_fail(PT_EFORMAT, "%s: not a JSON object", path);
    }
    return rc;
}

static int load_tokenizer_json(loader *l, const char *path)
{
    pt_json *root;
    l->file = path;
    int rc = parse_json_file(path, &root);
    if (rc != PT_OK)
        return rc;
    rc = read_pipeline(l, root);
    if (rc == PT_OK)
        rc = read_model(l, pt_json_get(root, "model"));
    if (rc == PT_OK)
        rc = read_added_tokens(l, pt_json_get(root, "added_tokens"));
    pt_json_free(root);
    return rc;
}

static const char endoftext[] = "<|endoftext|>";

static int load_vocab_merges(loader *l, const char *vocab_path, const char *merges_path)
{
    pt_json *root;
    l->file = vocab_path;
    int rc = parse_json_file(vocab_path, &root);
    if (rc != PT_OK)
        return rc;
    rc = read_vocab(l, root, "the vocabulary");
    pt_json_free(root);
    if (rc != PT_OK)
        return rc;
    unsigned char *text;
    size_t n;
    if ((rc = pt_read_whole_file(merges_path, &text, &n)) != PT_OK)
        return rc;
    l->file = merges_path;
    rc = read_merges_txt(l, (const char *)text, n);
    free(text);
    if (rc != PT_OK)
        return rc;
    byte_symbols(l, 0);
    l->t->bpe.unk = -1;
    l->t->add_prefix_space = 0;
    l->t->use_regex = 1;
    uint32_t id;
    if (lookup(l, endoftext, sizeof endoftext - 1, &id)) {
        rc = add_token(l->t, endoftext, sizeof endoftext - 1, id);
        if (rc == PT_OK) {
            l->t->added[l->t->n_added - 1].normalized = 0;
            l->t->added[l->t->n_added - 1].special = 1;
        }
    }
    return rc;
}

static char *join(const char *dir, const char *name)
{
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s", dir, name);
    return p;
}

static int is_file(const char *path)
{
    struct stat sb;
    return path && stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

int pt_tokenizer_find(const char *folder)
{
    char *json = join(folder, "tokenizer.json"), *vocab = join(folder, "vocab.json"),
         *merges = join(folder, "merges.txt");
    int found = is_file(json) || (is_file(vocab) && is_file(merges));
    free(json), free(vocab), free(merges);
    return found;
}

/* Which files path names, and reads them. */
static int load_files(loader *l, const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return pt_fail(PT_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return load_tokenizer_json(l, path);
    char *json = join(path, "tokenizer.json"), *vocab = join(path, "vocab.json"),
         *merges = join(path, "merges.txt");
    int rc;
    if (!json || !vocab || !merges)
        rc = pt_fail(PT_ENOMEM, "out of memory");
    else if (is_file(json))
        rc = load_tokenizer_json(l, json);
    else if (is_file(vocab) && is_file(merges))
        rc = load_vocab_merges(l, vocab, merges);
    else
        rc = pt_fail(PT_EIO,
                     "%s: no tokenizer in this folder (tokenizer.json, or vocab.json and "
                     "merges.txt)",
                     path);
    free(json), free(vocab), free(merges);
    return rc;
}

int pt_tokenizer_load(const char *path, pt_tokenizer **out)
{
    *out = NULL;
    pt_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return pt_fail(PT_ENOMEM, "out of memory for a tokenizer");
    loader l = {.t = t, .file = path};
    int rc = load_files(&l, path);
    if (rc == PT_OK && (pt_added_set_build(&t->sets[0], t->added, t->n_added, 0) != 0 ||
                        pt_added_set_build(&t->sets[1], t->added, t->n_added, 1) != 0))
        rc = pt_fail(PT_ENOMEM, "out of memory for the added tokens");
    t->endoftext = -1;
    for (size_t i = 0; i < t->n_added && t->endoftext < 0; i++)
        if (t->added[i].len == sizeof endoftext - 1 &&
            !memcmp(t->added[i].content, endoftext, sizeof endoftext - 1))
            t->endoftext = (int32_t)t->added[i].id;
    uint32_t id;
    if (rc == PT_OK && t->endoftext < 0 && lookup(&l, endoftext, sizeof endoftext - 1, &id))
        t->endoftext = (int32_t)id;
    pt_bytes_map_free(&l.ids);
    if (rc != PT_OK) {
        pt_tokenizer_destroy(t);
        return rc;
    }
    *out = t;
    return PT_OK;
}
