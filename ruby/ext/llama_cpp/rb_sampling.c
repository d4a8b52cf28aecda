/*
 * LLaMACpp::TokenData, LLaMACpp::TokenDataArray and the Context#sample_*
 * methods. Sampling is quick (one pass or a sort over n_vocab candidates),
 * so it runs with the GVL held.
 */
#include "rb_llama_cpp.h"

#include <string.h>

#include "core/log.h"

VALUE rb_cLLaMATokenData;
VALUE rb_cLLaMATokenDataArray;

/* ---- TokenData --------------------------------------------------------------------------- */

RBLLAMA_STRUCT_CLASS(token_data, llama_token_data, "LLaMACpp::TokenData")

/* TokenData.new(id:, logit:, p:) */
static VALUE token_data_initialize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "id", "logit", "p" };
    VALUE kw[3];
    rbllama_scan_kwargs(argc, argv, names, 3, 0, kw);
    rbllama_expect_integer(kw[0], "id must be an integer");
    rbllama_expect_float(kw[1], "logit must be a float");
    rbllama_expect_float(kw[2], "p must be a float");
    llama_token_data *d = token_data_get(self);
    d->id = NUM2INT(kw[0]);
    d->logit = (float)RFLOAT_VALUE(kw[1]);
    d->p = (float)RFLOAT_VALUE(kw[2]);
    return self;
}

INT_FIELD(token_data, token_data_get, id)
FLOAT_FIELD(token_data, token_data_get, logit)
FLOAT_FIELD(token_data, token_data_get, p)

static VALUE token_data_new(llama_token_data value) {
    VALUE obj = token_data_alloc(rb_cLLaMATokenData);
    *token_data_get(obj) = value;
    return obj;
}

/* ---- TokenDataArray ----------------------------------------------------------------------------- */

struct rb_token_data_array {
    llama_token_data_array array; /* the samplers shrink array.size in place */
    llama_token_data *storage;    /* what we allocated (array.data points into it) */
    size_t capacity;
};

static void tda_free(void *p) {
    struct rb_token_data_array *t = p;
    xfree(t->storage);
    xfree(t);
}

static size_t tda_memsize(const void *p) {
    const struct rb_token_data_array *t = p;
    return sizeof *t + t->capacity * sizeof(llama_token_data);
}

static const rb_data_type_t tda_type = {
    "LLaMACpp::TokenDataArray", { NULL, tda_free, tda_memsize, }, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE tda_alloc(VALUE klass) {
    struct rb_token_data_array *t;
    return TypedData_Make_Struct(klass, struct rb_token_data_array, &tda_type, t);
}

static struct rb_token_data_array *tda_get(VALUE self) {
    return rb_check_typeddata(self, &tda_type);
}

llama_token_data_array *rbllama_token_data_array_get(VALUE self) {
    struct rb_token_data_array *t = tda_get(self);
    if (!t->storage) rb_raise(rb_eRuntimeError, "TokenDataArray is empty");
    return &t->array;
}

/* TokenDataArray.new(array_of_token_data, sorted: false) — the values are copied */
static VALUE tda_initialize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "sorted" };
    VALUE items = Qnil, kwargs = Qnil, kw[1];
    rb_scan_args(argc, argv, "1:", &items, &kwargs);
    rbllama_get_kwargs(kwargs, names, 0, 1, kw);
    if (!RB_TYPE_P(items, T_ARRAY)) rb_raise(rb_eArgError, "1st argument must be an array");
    const long n = RARRAY_LEN(items);
    if (n == 0) rb_raise(rb_eArgError, "array must not be empty");
    for (long i = 0; i < n; i++) {
        if (!rb_obj_is_kind_of(RARRAY_AREF(items, i), rb_cLLaMATokenData)) {
            rb_raise(rb_eArgError, "array element must be a TokenData");
        }
    }
    if (kw[0] != Qundef) rbllama_expect_boolean(kw[0], "sorted must be a boolean");
    struct rb_token_data_array *t = tda_get(self);
    if (t->storage) rb_raise(rb_eRuntimeError, "TokenDataArray is already initialized");
    t->storage = ALLOC_N(llama_token_data, n);
    for (long i = 0; i < n; i++) t->storage[i] = *token_data_get(RARRAY_AREF(items, i));
    t->capacity = (size_t)n;
    t->array.data = t->storage;
    t->array.size = (size_t)n;
    t->array.sorted = kw[0] == Qtrue;
    return self;
}

static VALUE tda_size(VALUE self) {
    return SIZET2NUM(tda_get(self)->array.size);
}

static VALUE tda_sorted(VALUE self) {
    return tda_get(self)->array.sorted ? Qtrue : Qfalse;
}

/* Addition to 0.12.2: read the candidates (copies) after sampling. */
static VALUE tda_aref(VALUE self, VALUE index) {
    const struct rb_token_data_array *t = tda_get(self);
    long i = NUM2LONG(index);
    if (i < 0) i += (long)t->array.size;
    if (i < 0 || (size_t)i >= t->array.size) return Qnil;
    return token_data_new(t->array.data[i]);
}

static VALUE tda_to_a(VALUE self) {
    const struct rb_token_data_array *t = tda_get(self);
    VALUE result = rb_ary_new_capa((long)t->array.size);
    for (size_t i = 0; i < t->array.size; i++) rb_ary_push(result, token_data_new(t->array.data[i]));
    return result;
}

/* ---- Context#sample_* ---------------------------------------------------------------------------- */

static struct llama_context *sampling_ctx(VALUE self) {
    return rbllama_context_get(self, rb_eRuntimeError)->ctx;
}

static llama_token_data_array *candidates_arg(VALUE candidates, const char *message) {
    if (!rb_obj_is_kind_of(candidates, rb_cLLaMATokenDataArray)) rb_raise(rb_eArgError, "%s", message);
    return rbllama_token_data_array_get(candidates);
}

static llama_token_data_array *candidates_to_draw_from(VALUE candidates) {
    llama_token_data_array *c = candidates_arg(candidates, "1st argument must be a TokenDataArray");
    if (c->size == 0) rb_raise(rb_eRuntimeError, "TokenDataArray has no candidates left");
    return c;
}

static size_t min_keep_arg(VALUE v) {
    if (v == Qundef) return 1;
    rbllama_expect_integer(v, "min_keep must be an integer");
    const int n = NUM2INT(v);
    if (n < 0) rb_raise(rb_eArgError, "min_keep must be a non-negative integer");
    return (size_t)n;
}

/* Splits (candidates, **kwargs) for the samplers. */
static VALUE scan_candidates(int argc, VALUE *argv, const char *const *names, int n_required, int n_optional,
                             VALUE *kw) {
    VALUE candidates = Qnil, kwargs = Qnil;
    rb_scan_args(argc, argv, "1:", &candidates, &kwargs);
    rbllama_get_kwargs(kwargs, names, n_required, n_optional, kw);
    return candidates;
}

static VALUE context_sample_repetition_penalties(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "penalty_repeat", "penalty_freq", "penalty_present" };
    VALUE kw[3], candidates = Qnil, last_n_tokens = Qnil, kwargs = Qnil;
    rb_scan_args(argc, argv, "2:", &candidates, &last_n_tokens, &kwargs);
    rbllama_get_kwargs(kwargs, names, 3, 0, kw);
    struct llama_context *ctx = sampling_ctx(self);
    llama_token_data_array *c = candidates_arg(candidates, "candidates must be a TokenDataArray");
    if (!RB_TYPE_P(last_n_tokens, T_ARRAY)) rb_raise(rb_eArgError, "last_n_tokens must be an Array");
    rbllama_expect_float(kw[0], "penalty_repeat must be a float");
    rbllama_expect_float(kw[1], "penalty_freq must be a float");
    rbllama_expect_float(kw[2], "penalty_present must be a float");
    long n;
    llama_token *tokens = rbllama_tokens_from_array(last_n_tokens, &n);
    llama_sample_repetition_penalties(ctx, c, tokens, (size_t)n, (float)RFLOAT_VALUE(kw[0]),
                                      (float)RFLOAT_VALUE(kw[1]), (float)RFLOAT_VALUE(kw[2]));
    xfree(tokens);
    return Qnil;
}

/* n_vocab numbers of a Ruby Array into floats (ArgumentError when shorter). */
static void floats_from_array(VALUE array, float *out, long n, const char *name) {
    if (RARRAY_LEN(array) < n) {
        rb_raise(rb_eArgError, "%s must have at least n_vocab (%ld) elements, got %ld", name, n, RARRAY_LEN(array));
    }
    for (long i = 0; i < n; i++) out[i] = (float)NUM2DBL(RARRAY_AREF(array, i));
}

/* sample_apply_guidance(logits:, logits_guidance:, scale:) — the result is written
 * back into `logits` (0.12.2 computed it into a temporary and dropped it). */
static VALUE context_sample_apply_guidance(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "logits", "logits_guidance", "scale" };
    VALUE kw[3];
    rbllama_scan_kwargs(argc, argv, names, 0, 3, kw);
    struct rbllama_context *rc = rbllama_context_get(self, rb_eRuntimeError);
    if (!RB_TYPE_P(kw[0], T_ARRAY)) rb_raise(rb_eArgError, "logits must be an Array");
    if (!RB_TYPE_P(kw[1], T_ARRAY)) rb_raise(rb_eArgError, "logits_guidance must be an Array");
    if (kw[2] == Qundef || !RB_FLOAT_TYPE_P(kw[2])) rb_raise(rb_eArgError, "scale must be a float");
    rb_check_frozen(kw[0]);
    const long n_vocab = rc->model_ref->n_vocab;
    VALUE tmp_logits, tmp_guidance;
    float *logits = ALLOCV_N(float, tmp_logits, n_vocab);
    float *guidance = ALLOCV_N(float, tmp_guidance, n_vocab);
    floats_from_array(kw[0], logits, n_vocab, "logits");
    floats_from_array(kw[1], guidance, n_vocab, "logits_guidance");
    llama_sample_apply_guidance(rc->ctx, logits, guidance, (float)RFLOAT_VALUE(kw[2]));
    for (long i = 0; i < n_vocab; i++) rb_ary_store(kw[0], i, DBL2NUM(logits[i]));
    ALLOCV_END(tmp_logits);
    ALLOCV_END(tmp_guidance);
    return Qnil;
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static VALUE context_sample_classifier_free_guidance(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "guidance", "scale" };
    VALUE kw[2];
    VALUE candidates = scan_candidates(argc, argv, names, 2, 0, kw);
    struct rbllama_context *rc = rbllama_context_get(self, rb_eRuntimeError);
    llama_token_data_array *c = candidates_arg(candidates, "1st argument must be a TokenDataArray");
    if (!rb_obj_is_kind_of(kw[0], rb_cLLaMAContext)) rb_raise(rb_eArgError, "guidance must be a Context");
    rbllama_expect_float(kw[1], "scale must be a float");
    struct rbllama_context *guidance = rbllama_context_peek(kw[0]);
    if (!guidance->ctx) rb_raise(rb_eRuntimeError, "guidance context is not initialized");
    guidance = rbllama_context_get(kw[0], rb_eRuntimeError); /* refuses a busy one */
    if (!guidance->evaluated) rb_raise(rb_eRuntimeError, "guidance context has not been evaluated");
    if (guidance->model_ref->n_vocab != rc->model_ref->n_vocab) {
        rb_raise(rb_eArgError, "guidance context has another vocabulary (%d tokens, not %d)",
                 guidance->model_ref->n_vocab, rc->model_ref->n_vocab);
    }
    /* the library reads the candidates as the n_vocab logits in id order */
    if (c->size != (size_t)rc->model_ref->n_vocab || c->sorted) {
        rb_raise(rb_eArgError, "candidates must be all n_vocab (%d) tokens, unsorted", rc->model_ref->n_vocab);
    }
    for (size_t i = 0; i < c->size; i++) {
        if (c->data[i].id != (llama_token)i) rb_raise(rb_eArgError, "candidates must be in token id order");
    }
    llama_sample_classifier_free_guidance(rc->ctx, c, guidance->ctx, (float)RFLOAT_VALUE(kw[1]));
    return Qnil;
}
#pragma GCC diagnostic pop

static VALUE context_sample_softmax(VALUE self, VALUE candidates) {
    struct llama_context *ctx = sampling_ctx(self);
    llama_sample_softmax(ctx, candidates_arg(candidates, "argument must be a TokenDataArray"));
    return Qnil;
}

static VALUE context_sample_top_k(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "k", "min_keep" };
    VALUE kw[2];
    VALUE candidates = scan_candidates(argc, argv, names, 1, 1, kw);
    struct llama_context *ctx = sampling_ctx(self);
    llama_token_data_array *c = candidates_arg(candidates, "1st argument must be a TokenDataArray");
    rbllama_expect_integer(kw[0], "k must be an integer");
    const size_t min_keep = min_keep_arg(kw[1]);
    llama_sample_top_k(ctx, c, NUM2INT(kw[0]), min_keep);
    return Qnil;
}

typedef void (*prob_sampler)(struct llama_context *, llama_token_data_array *, float, size_t);

/* The samplers of the form (candidates, <key>: Float, min_keep: 1). */
static VALUE prob_sample(int argc, VALUE *argv, VALUE self, const char *key, prob_sampler sampler) {
    const char *const names[] = { key, "min_keep" };
    VALUE kw[2];
    VALUE candidates = scan_candidates(argc, argv, names, 1, 1, kw);
    struct llama_context *ctx = sampling_ctx(self);
    llama_token_data_array *c = candidates_arg(candidates, "1st argument must be a TokenDataArray");
    rbllama_expect_float(kw[0], "prob must be a float");
    const size_t min_keep = min_keep_arg(kw[1]);
    sampler(ctx, c, (float)RFLOAT_VALUE(kw[0]), min_keep);
    return Qnil;
}

static VALUE context_sample_top_p(int argc, VALUE *argv, VALUE self) {
    return prob_sample(argc, argv, self, "prob", llama_sample_top_p);
}

static VALUE context_sample_min_p(int argc, VALUE *argv, VALUE self) {
    return prob_sample(argc, argv, self, "prob", llama_sample_min_p);
}

static VALUE context_sample_tail_free(int argc, VALUE *argv, VALUE self) {
    return prob_sample(argc, argv, self, "z", llama_sample_tail_free);
}

static VALUE context_sample_typical(int argc, VALUE *argv, VALUE self) {
    return prob_sample(argc, argv, self, "prob", llama_sample_typical);
}

/* sample_temp(candidates, temp:) and its deprecated alias sample_temperature(candidates, temperature:):
 * `deprecated` is the warning the alias gives (NULL for none). */
static VALUE temp_sample(int argc, VALUE *argv, VALUE self, const char *key, const char *type_message,
                         const char *deprecated) {
    const char *const names[] = { key };
    VALUE kw[1];
    VALUE candidates = scan_candidates(argc, argv, names, 1, 0, kw);
    struct llama_context *ctx = sampling_ctx(self);
    if (deprecated) rb_warn("%s", deprecated);
    llama_token_data_array *c = candidates_arg(candidates, "1st argument must be a TokenDataArray");
    rbllama_expect_float(kw[0], type_message);
    llama_sample_temp(ctx, c, (float)RFLOAT_VALUE(kw[0]));
    return Qnil;
}

static VALUE context_sample_temp(int argc, VALUE *argv, VALUE self) {
    return temp_sample(argc, argv, self, "temp", "temp must be a float", NULL);
}

static VALUE context_sample_temperature(int argc, VALUE *argv, VALUE self) {
    return temp_sample(argc, argv, self, "temperature", "temperature must be a float",
                       "sample_temperature is deprecated. Use sample_temp instead.");
}

static VALUE context_sample_token_mirostat(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "tau", "eta", "m", "mu" };
    VALUE kw[4];
    VALUE candidates = scan_candidates(argc, argv, names, 4, 0, kw);
    struct llama_context *ctx = sampling_ctx(self);
    llama_token_data_array *c = candidates_to_draw_from(candidates);
    rbllama_expect_float(kw[0], "tau must be a float");
    rbllama_expect_float(kw[1], "eta must be a float");
    rbllama_expect_integer(kw[2], "m must be an integer");
    rbllama_expect_float(kw[3], "mu must be a float");
    float mu = (float)RFLOAT_VALUE(kw[3]);
    llama_token id = llama_sample_token_mirostat(ctx, c, (float)RFLOAT_VALUE(kw[0]), (float)RFLOAT_VALUE(kw[1]),
                                                 NUM2INT(kw[2]), &mu);
    return rb_assoc_new(INT2NUM(id), DBL2NUM(mu));
}

static VALUE context_sample_token_mirostat_v2(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "tau", "eta", "mu" };
    VALUE kw[3];
    VALUE candidates = scan_candidates(argc, argv, names, 3, 0, kw);
    struct llama_context *ctx = sampling_ctx(self);
    llama_token_data_array *c = candidates_to_draw_from(candidates);
    rbllama_expect_float(kw[0], "tau must be a float");
    rbllama_expect_float(kw[1], "eta must be a float");
    rbllama_expect_float(kw[2], "mu must be a float");
    float mu = (float)RFLOAT_VALUE(kw[2]);
    llama_token id = llama_sample_token_mirostat_v2(ctx, c, (float)RFLOAT_VALUE(kw[0]), (float)RFLOAT_VALUE(kw[1]), &mu);
    return rb_assoc_new(INT2NUM(id), DBL2NUM(mu));
}

static VALUE context_sample_token_greedy(VALUE self, VALUE candidates) {
    struct llama_context *ctx = sampling_ctx(self);
    return INT2NUM(llama_sample_token_greedy(ctx, candidates_to_draw_from(candidates)));
}

static VALUE context_sample_token(VALUE self, VALUE candidates) {
    struct llama_context *ctx = sampling_ctx(self);
    return INT2NUM(llama_sample_token(ctx, candidates_to_draw_from(candidates)));
}

static VALUE context_sample_grammar(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "grammar" };
    VALUE kw[1];
    VALUE candidates = scan_candidates(argc, argv, names, 1, 0, kw);
    struct llama_context *ctx = sampling_ctx(self);
    llama_token_data_array *c = candidates_arg(candidates, "1st argument must be a TokenDataArray");
    if (!rb_obj_is_kind_of(kw[0], rb_cLLaMAGrammar)) rb_raise(rb_eArgError, "grammar must be a Grammar");
    llama_sample_grammar(ctx, c, rbllama_grammar_get(kw[0]));
    return Qnil;
}

static VALUE context_grammar_accept_token(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "grammar", "token" };
    VALUE kw[2];
    rbllama_scan_kwargs(argc, argv, names, 2, 0, kw);
    struct rbllama_context *rc = rbllama_context_get(self, rb_eRuntimeError);
    if (!rb_obj_is_kind_of(kw[0], rb_cLLaMAGrammar)) rb_raise(rb_eArgError, "grammar must be a Grammar");
    if (!RB_INTEGER_TYPE_P(kw[1])) rb_raise(rb_eArgError, "token must be an Integer");
    const int token = NUM2INT(kw[1]);
    if (token < 0 || token >= rc->model_ref->n_vocab) {
        rb_raise(rb_eIndexError, "token id %d is out of range (0...%d)", token, rc->model_ref->n_vocab);
    }
    struct llama_grammar *grammar = rbllama_grammar_get(kw[0]);
    error_clear();
    llama_grammar_accept_token(rc->ctx, grammar, token);
    /* b1892 aborts on a token the grammar rejects; the library reports it instead */
    const char *msg = error_last();
    if (msg[0]) rbllama_raise_library_error(rb_eRuntimeError, "Failed to accept token", msg);
    return Qnil;
}

void rbllama_init_sampling(void) {
    VALUE k = rb_cLLaMATokenData = rb_define_class_under(rb_mLLaMACpp, "TokenData", rb_cObject);
    rb_define_alloc_func(k, token_data_alloc);
    rb_define_method(k, "initialize", token_data_initialize, -1);
    DEFINE_ACCESSOR(k, token_data, id, "id");
    DEFINE_ACCESSOR(k, token_data, logit, "logit");
    DEFINE_ACCESSOR(k, token_data, p, "p");

    k = rb_cLLaMATokenDataArray = rb_define_class_under(rb_mLLaMACpp, "TokenDataArray", rb_cObject);
    rb_define_alloc_func(k, tda_alloc);
    rb_define_method(k, "initialize", tda_initialize, -1);
    rb_define_method(k, "size", tda_size, 0);
    rb_define_method(k, "sorted", tda_sorted, 0);
    rb_define_method(k, "[]", tda_aref, 1);
    rb_define_method(k, "to_a", tda_to_a, 0);

    k = rb_cLLaMAContext;
    rb_define_method(k, "sample_repetition_penalties", context_sample_repetition_penalties, -1);
    rb_define_method(k, "sample_apply_guidance", context_sample_apply_guidance, -1);
    rb_define_method(k, "sample_classifier_free_guidance", context_sample_classifier_free_guidance, -1);
    rb_define_method(k, "sample_softmax", context_sample_softmax, 1);
    rb_define_method(k, "sample_top_k", context_sample_top_k, -1);
    rb_define_method(k, "sample_top_p", context_sample_top_p, -1);
    rb_define_method(k, "sample_min_p", context_sample_min_p, -1);
    rb_define_method(k, "sample_tail_free", context_sample_tail_free, -1);
    rb_define_method(k, "sample_typical", context_sample_typical, -1);
    rb_define_method(k, "sample_temp", context_sample_temp, -1);
    rb_define_method(k, "sample_temperature", context_sample_temperature, -1);
    rb_define_method(k, "sample_token_mirostat", context_sample_token_mirostat, -1);
    rb_define_method(k, "sample_token_mirostat_v2", context_sample_token_mirostat_v2, -1);
    rb_define_method(k, "sample_token_greedy", context_sample_token_greedy, 1);
    rb_define_method(k, "sample_token", context_sample_token, 1);
    rb_define_method(k, "sample_grammar", context_sample_grammar, -1);
    rb_define_method(k, "grammar_accept_token", context_grammar_accept_token, -1);
}
