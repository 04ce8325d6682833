/* hf_config.c: GPT2Config <-> pt_model_config (hf_config.h). */
#include "io/hf_config.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tensor/error.h"

static const struct {
    const char *name;
    pt_activation act;
} activations[] = {
    {"gelu_new", PT_ACT_GELU_NEW},  {"gelu_pytorch_tanh", PT_ACT_GELU_NEW},
    {"gelu_fast", PT_ACT_GELU_NEW}, {"gelu", PT_ACT_GELU},
    {"gelu_python", PT_ACT_GELU},   {"relu", PT_ACT_RELU},
    {"silu", PT_ACT_SILU},          {"swish", PT_ACT_SILU},
};

const char *pt_hf_activation_name(pt_activation a)
{
    switch (a) {
    case PT_ACT_GELU: return "gelu";
    case PT_ACT_RELU: return "relu";
    case PT_ACT_SILU: return "silu";
    default: return "gelu_new";
    }
}

int pt_hf_activation_parse(const char *name)
{
    for (size_t i = 0; i < sizeof activations / sizeof activations[0]; i++)
        if (!strcmp(name, activations[i].name))
            return (int)activations[i].act;
    return -1;
}

/* ---- Reading ----------------------------------------------------------- */

static const char *type_name(const pt_json *v)
{
    static const char *const names[] = {"null",     "a boolean", "a number",
                                        "a string", "an array",  "an object"};
    return names[v->type];
}

/* An integer field in [1, 2^30]: PT_OK, 1 when absent (or null and
 * null_ok), or an error naming it. */
static int get_int(const pt_json *obj, const char *path, const char *key, int null_ok, int *out)
{
    const pt_json *v = pt_json_get(obj, key);
    if (!v || (null_ok && v->type == PT_JSON_NULL))
        return 1;
    if (v->type != PT_JSON_NUMBER || !v->is_int || v->int_value < 1 || v->int_value > 1 << 30)
        return pt_fail(PT_EFORMAT, "%s: \"%s\" is %s%s; expected an integer from 1 to %d%s", path,
                       key, type_name(v), v->type == PT_JSON_NUMBER ? " out of range" : "", 1 << 30,
                       null_ok ? " or null" : "");
    *out = (int)v->int_value;
    return PT_OK;
}

static int get_bool(const pt_json *obj, const char *path, const char *key, int *out)
{
    const pt_json *v = pt_json_get(obj, key);
    if (!v)
        return 1;
    if (v->type != PT_JSON_BOOL)
        return pt_fail(PT_EFORMAT, "%s: \"%s\" is %s; expected true or false", path, key,
                       type_name(v));
    *out = v->boolean;
    return PT_OK;
}

static int need(int rc, const char *path, const char *key)
{
    return rc == 1 ? pt_fail(PT_EFORMAT, "%s: \"%s\" is missing", path, key) : rc;
}

static int read_kind(const pt_json *obj, const char *path)
{
    const pt_json *type = pt_json_get(obj, "model_type");
    if (type && (type->type != PT_JSON_STRING || strcmp(type->string, "gpt2")))
        return pt_fail(PT_EUNSUPPORTED,
                       "%s: \"model_type\" is %s%s%s: pipetrain reads GPT-2 models (\"gpt2\")",
                       path, type->type == PT_JSON_STRING ? "\"" : "",
                       type->type == PT_JSON_STRING ? type->string : type_name(type),
                       type->type == PT_JSON_STRING ? "\"" : "");
    const pt_json *arch = pt_json_get(obj, "architectures");
    for (size_t i = 0; arch && arch->type == PT_JSON_ARRAY && i < arch->n; i++) {
        const pt_json *a = arch->items[i];
        if (a->type != PT_JSON_STRING ||
            (strcmp(a->string, "GPT2LMHeadModel") && strcmp(a->string, "GPT2Model")))
            return pt_fail(PT_EUNSUPPORTED,
                           "%s: \"architectures\" names %s: pipetrain reads GPT2LMHeadModel "
                           "(and GPT2Model) weights",
                           path, a->type == PT_JSON_STRING ? a->string : type_name(a));
    }
    if (!type && !arch)
        return pt_fail(PT_EFORMAT,
                       "%s: neither \"model_type\" nor \"architectures\": not a "
                       "Hugging Face model config",
                       path);
    int cross = 0, rc = get_bool(obj, path, "add_cross_attention", &cross);
    if (rc == PT_OK && cross)
        return pt_fail(PT_EUNSUPPORTED,
                       "%s: \"add_cross_attention\" is true: pipetrain has no cross-attention",
                       path);
    return rc < 0 ? rc : PT_OK;
}

static int read_activation(const pt_json *obj, const char *path, pt_activation *out)
{
    const pt_json *v = pt_json_get(obj, "activation_function");
    if (!v)
        return PT_OK;
    int a = v->type == PT_JSON_STRING ? pt_hf_activation_parse(v->string) : -1;
    if (a < 0)
        return pt_fail(PT_EUNSUPPORTED,
                       "%s: \"activation_function\" is %s%s%s: pipetrain computes gelu_new "
                       "(also gelu_pytorch_tanh, gelu_fast), gelu (gelu_python), relu, silu "
                       "(swish)",
                       path, v->type == PT_JSON_STRING ? "\"" : "",
                       v->type == PT_JSON_STRING ? v->string : type_name(v),
                       v->type == PT_JSON_STRING ? "\"" : "");
    *out = (pt_activation)a;
    return PT_OK;
}

static int read_epsilon(const pt_json *obj, const char *path, float *out)
{
    const pt_json *v = pt_json_get(obj, "layer_norm_epsilon");
    if (!v)
        return PT_OK;
    if (v->type != PT_JSON_NUMBER || !(v->number > 0) || !isfinite((float)v->number) ||
        (float)v->number == 0)
        return pt_fail(PT_EFORMAT, "%s: \"layer_norm_epsilon\" is %s; expected a positive number",
                       path, v->type == PT_JSON_NUMBER ? "not positive in float32" : type_name(v));
    *out = (float)v->number;
    return PT_OK;
}

int pt_hf_config_read(const pt_json *obj, const char *path, pt_model_config *cfg)
{
    pt_model_config c = pt_model_config_gpt();
    int rc = read_kind(obj, path);
    if (rc == PT_OK)
        rc = need(get_int(obj, path, "vocab_size", 0, &c.vocab), path, "vocab_size");
    if (rc == PT_OK)
        rc = need(get_int(obj, path, "n_embd", 0, &c.n_embd), path, "n_embd");
    if (rc == PT_OK)
        rc = need(get_int(obj, path, "n_layer", 0, &c.n_layer), path, "n_layer");
    if (rc == PT_OK)
        rc = need(get_int(obj, path, "n_head", 0, &c.n_head), path, "n_head");
    if (rc == PT_OK) { /* transformers reads n_positions; n_ctx is its old name */
        rc = get_int(obj, path, "n_positions", 0, &c.n_positions);
        if (rc == 1)
            rc = need(get_int(obj, path, "n_ctx", 0, &c.n_positions), path, "n_positions");
    }
    if (rc == PT_OK && (rc = get_int(obj, path, "n_inner", 1, &c.n_inner)) == 1)
        rc = PT_OK;
    if (rc == PT_OK)
        rc = read_activation(obj, path, &c.activation);
    if (rc == PT_OK)
        rc = read_epsilon(obj, path, &c.layer_norm_epsilon);
    const char *bools[] = {"scale_attn_weights", "scale_attn_by_inverse_layer_idx",
                           "tie_word_embeddings", "reorder_and_upcast_attn"};
    int *fields[] = {&c.scale_attn_weights, &c.scale_attn_by_inverse_layer_idx,
                     &c.tie_word_embeddings, NULL};
    for (int i = 0; rc >= 0 && i < 4; i++) {
        int x = 0;
        if ((rc = get_bool(obj, path, bools[i], &x)) == PT_OK && fields[i])
            *fields[i] = x;
    }
    if (rc < 0)
        return rc;
    if (c.n_embd % c.n_head)
        return pt_fail(PT_EFORMAT, "%s: \"n_embd\" %d is not a multiple of \"n_head\" %d", path,
                       c.n_embd, c.n_head);
    c.seq_len = c.n_positions;
    *cfg = c;
    return PT_OK;
}

double pt_hf_config_dropout(const pt_json *obj, const char **name)
{
    static const char *const keys[] = {"attn_pdrop", "embd_pdrop", "resid_pdrop"};
    double most = 0;
    for (int i = 0; i < 3; i++) {
        const pt_json *v = pt_json_get(obj, keys[i]);
        if (v && v->type == PT_JSON_NUMBER && v->number > most)
            most = v->number, *name = keys[i];
    }
    return most;
}

/* ---- Writing ----------------------------------------------------------- */

int pt_hf_config_write(FILE *f, const pt_model_config *c, int endoftext)
{
    const char *yes[] = {"false", "true"};
    char token[16] = "null";
    if (endoftext >= 0)
        snprintf(token, sizeof token, "%d", endoftext);
    fprintf(f,
            "{\n  \"architectures\": [\"GPT2LMHeadModel\"],\n  \"model_type\": \"gpt2\",\n"
            "  \"vocab_size\": %d,\n  \"n_positions\": %d,\n  \"n_ctx\": %d,\n"
            "  \"n_embd\": %d,\n  \"n_layer\": %d,\n  \"n_head\": %d,\n",
            c->vocab, pt_gpt_positions(c), pt_gpt_positions(c), c->n_embd, c->n_layer, c->n_head);
    if (c->n_inner && c->n_inner != 4 * c->n_embd)
        fprintf(f, "  \"n_inner\": %d,\n", c->n_inner);
    else
        fputs("  \"n_inner\": null,\n", f);
    fprintf(f, "  \"activation_function\": \"%s\",\n  \"layer_norm_epsilon\": ",
            pt_hf_activation_name(c->activation));
    pt_json_write_number(f, c->layer_norm_epsilon);
    fprintf(f,
            ",\n  \"resid_pdrop\": 0.0,\n  \"embd_pdrop\": 0.0,\n  \"attn_pdrop\": 0.0,\n"
            "  \"initializer_range\": 0.02,\n  \"scale_attn_weights\": %s,\n"
            "  \"scale_attn_by_inverse_layer_idx\": %s,\n  \"reorder_and_upcast_attn\": false,\n"
            "  \"tie_word_embeddings\": %s,\n  \"bos_token_id\": %s,\n"
            "  \"eos_token_id\": %s,\n  \"torch_dtype\": \"float32\",\n  \"use_cache\": true\n}\n",
            yes[!!c->scale_attn_weights], yes[!!c->scale_attn_by_inverse_layer_idx],
            yes[!!c->tie_word_embeddings], token, token);
    return ferror(f) ? pt_fail(PT_EIO, "cannot write config.json") : PT_OK;
}
