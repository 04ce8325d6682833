/* text_tokens.c: text corpora encoded with a tokenizer (see
 * text_tokens.h). The files come from io/text_corpus.c's listing, so
 * every reader of text agrees on which files a corpus holds. */
#include "tensor/error.h"
#include "text/text_tokens.h"

int pt_tokenizer_encode_document(pt_tokenizer *tok, const char *text, size_t n, pt_token_ids *ids)
{
    if (n == 0)
        return PT_OK;
    int eot = pt_tokenizer_endoftext(tok);
    size_t before = ids->n;
    int rc = eot >= 0 ? pt_token_ids_reserve(ids, 1) : PT_OK;
    if (rc != PT_OK)
        return rc;
    if (eot >= 0)
        ids->ids[ids->n++] = (uint32_t)eot;
    rc = pt_tokenizer_encode(tok, text, n, ids);
    if (rc != PT_OK)
        ids->n = before;
    return rc;
}

static int encode_document(void *tok, const unsigned char *text, size_t n, pt_token_ids *out)
{
    return pt_tokenizer_encode_document(tok, (const char *)text, n, out);
}

int pt_text_data_encode(const char *const *paths, int n_paths, double val_fraction,
                        pt_tokenizer *tok, pt_token_data *out)
{
    return pt_text_data_load_with(paths, n_paths, val_fraction, encode_document, tok,
                                  pt_tokenizer_vocab_size(tok), out);
}

int pt_text_data_encode_path(const char *const *paths, int n_paths, double val_fraction,
                             const char *tokenizer, int vocab, pt_token_data *out)
{
    pt_tokenizer *tok;
    int rc = pt_tokenizer_load(tokenizer, &tok);
    if (rc != PT_OK)
        return rc;
    int size = pt_tokenizer_vocab_size(tok);
    if (vocab != size)
        rc = pt_fail(PT_EINVAL,
                     "the tokenizer %s has %d tokens: the gpt's vocab must be %d (got %d)",
                     tokenizer, size, size, vocab);
    else
        rc = pt_text_data_encode(paths, n_paths, val_fraction, tok, out);
    pt_tokenizer_destroy(tok);
    return rc;
}
