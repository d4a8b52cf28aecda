/*
 * LLaMACpp::Batch: a llama_batch with its buffers. Every accessor checks
 * its index against the buffer it touches (0.12.2 wrote past them), and the
 * contents start zeroed (0.12.2 left them uninitialised).
 */
#include "rb_llama_cpp.h"

#include <string.h>

VALUE rb_cLLaMABatch;

struct rb_batch {
    struct llama_batch batch;
    int32_t capacity;  /* tokens the per-token buffers hold */
    int32_t n_embd;    /* > 0: an embeddings batch (no token ids) */
    int32_t max_n_seq; /* sequence ids per token; 0 for Batch.get_one */
    bool from_init;    /* buffers from llama_batch_init (else a get_one copy of the tokens) */
    int in_use;        /* decodes reading it now (setters refuse meanwhile) */
};

static void batch_free(void *p) {
    struct rb_batch *b = p;
    if (b->from_init) {
        /* b1892's llama_batch_free frees seq_id[i] for i < n_tokens: make that all of them */
        b->batch.n_tokens = b->capacity;
        llama_batch_free(b->batch);
    } else {
        xfree(b->batch.token);
    }
    xfree(b);
}

static size_t batch_memsize(const void *p) {
    const struct rb_batch *b = p;
    size_t per_token = sizeof(llama_token) + sizeof(llama_pos) + sizeof(int32_t) + sizeof(int8_t) +
                       sizeof(llama_seq_id *) + (size_t)b->max_n_seq * sizeof(llama_seq_id) +
                       (size_t)b->n_embd * sizeof(float);
    return sizeof *b + (size_t)b->capacity * per_token;
}

static const rb_data_type_t batch_type = {
    "LLaMACpp::Batch", { NULL, batch_free, batch_memsize, }, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE batch_alloc(VALUE klass) {
    struct rb_batch *b;
    return TypedData_Make_Struct(klass, struct rb_batch, &batch_type, b);
}

static struct rb_batch *batch_get(VALUE self) {
    return rb_check_typeddata(self, &batch_type);
}

static struct rb_batch *batch_for_write(VALUE self) {
    struct rb_batch *b = batch_get(self);
    if (b->in_use) rb_raise(rb_eRuntimeError, "Batch is in use by a decode in another thread");
    return b;
}

/* Batch.new(max_n_token:, n_embd:, max_n_seq:) */
static VALUE batch_initialize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "max_n_token", "n_embd", "max_n_seq" };
    VALUE kw[3];
    rbllama_scan_kwargs(argc, argv, names, 3, 0, kw);
    rbllama_expect_integer(kw[0], "max_n_token must be an integer");
    rbllama_expect_integer(kw[1], "n_embd must be an integer");
    rbllama_expect_integer(kw[2], "max_n_seq must be an integer");
    const int max_n_token = NUM2INT(kw[0]), n_embd = NUM2INT(kw[1]), max_n_seq = NUM2INT(kw[2]);
    if (max_n_token <= 0) rb_raise(rb_eArgError, "max_n_token must be a positive integer");
    if (n_embd < 0) rb_raise(rb_eArgError, "n_embd must be a non-negative integer");
    if (max_n_seq <= 0) rb_raise(rb_eArgError, "max_n_seq must be a positive integer");
    const uint64_t floats = (uint64_t)max_n_token * (uint64_t)(n_embd > 0 ? n_embd : 1);
    const uint64_t seq_ids = (uint64_t)max_n_token * (uint64_t)max_n_seq;
    if (floats > ((uint64_t)1 << 36) || seq_ids > ((uint64_t)1 << 36)) {
        rb_raise(rb_eArgError, "batch of %d tokens x %d floats x %d sequences is too large", max_n_token, n_embd,
                 max_n_seq);
    }
    struct rb_batch *b = batch_for_write(self);
    if (b->capacity) rb_raise(rb_eRuntimeError, "Batch is already initialized");

    struct llama_batch batch = llama_batch_init(max_n_token, n_embd, max_n_seq);
    bool ok = (n_embd ? batch.embd != NULL : batch.token != NULL) && batch.pos && batch.n_seq_id && batch.seq_id &&
              batch.logits;
    for (int i = 0; ok && i < max_n_token; i++) ok = batch.seq_id[i] != NULL;
    if (!ok) {
        batch.n_tokens = max_n_token;
        llama_batch_free(batch);
        rb_raise(rb_eNoMemError, "failed to allocate a batch of %d tokens", max_n_token);
    }
    if (batch.token) memset(batch.token, 0, (size_t)max_n_token * sizeof *batch.token);
    if (batch.embd) memset(batch.embd, 0, (size_t)floats * sizeof *batch.embd);
    memset(batch.pos, 0, (size_t)max_n_token * sizeof *batch.pos);
    memset(batch.n_seq_id, 0, (size_t)max_n_token * sizeof *batch.n_seq_id);
    memset(batch.logits, 0, (size_t)max_n_token * sizeof *batch.logits);
    for (int i = 0; i < max_n_token; i++) memset(batch.seq_id[i], 0, (size_t)max_n_seq * sizeof **batch.seq_id);
    batch.n_tokens = 0;
    b->batch = batch;
    b->capacity = max_n_token;
    b->n_embd = n_embd;
    b->max_n_seq = max_n_seq;
    b->from_init = true;
    return self;
}

/* Batch.get_one(tokens:, n_tokens:, pos_zero:, seq_id:) — the tokens are copied */
static VALUE batch_s_get_one(int argc, VALUE *argv, VALUE klass) {
    static const char *const names[] = { "tokens", "n_tokens", "pos_zero", "seq_id" };
    VALUE kw[4];
    rbllama_scan_kwargs(argc, argv, names, 4, 0, kw);
    if (!RB_TYPE_P(kw[0], T_ARRAY)) rb_raise(rb_eArgError, "tokens must be an array");
    rbllama_expect_integer(kw[1], "n_tokens must be an integer");
    rbllama_expect_integer(kw[2], "pos_zero must be an integer");
    rbllama_expect_integer(kw[3], "seq_id must be an integer");
    const int n_tokens = NUM2INT(kw[1]), pos_zero = NUM2INT(kw[2]), seq_id = NUM2INT(kw[3]);
    const long n_given = RARRAY_LEN(kw[0]);
    if (n_tokens < 0 || n_tokens > n_given) {
        rb_raise(rb_eArgError, "n_tokens (%d) must be between 0 and tokens.size (%ld)", n_tokens, n_given);
    }
    if (n_given > INT32_MAX) rb_raise(rb_eArgError, "too many tokens");
    VALUE obj = batch_alloc(klass);
    struct rb_batch *b = batch_get(obj);
    long n;
    llama_token *tokens = rbllama_tokens_from_array(kw[0], &n);
    b->batch = llama_batch_get_one(tokens, n_tokens, pos_zero, seq_id);
    b->batch.token = tokens; /* owned by the Batch from here */
    b->capacity = (int32_t)n;
    return obj;
}

/* ---- indexed accessors ------------------------------------------------------------------ */

/* i checked against the per-token buffer `present` (NULL: this batch has none). */
static int token_index(const struct rb_batch *b, VALUE index, const void *present, const char *what) {
    const int i = NUM2INT(index);
    if (i < 0) rb_raise(rb_eArgError, "id must be greater or equal to 0");
    if (!present) {
        rb_raise(rb_eIndexError, "this batch has no %s buffer (%s)", what,
                 b->from_init ? "it holds embeddings" : "Batch.get_one batches carry only tokens");
    }
    if (i >= b->capacity) rb_raise(rb_eIndexError, "id %d is out of range (the batch holds %d tokens)", i, b->capacity);
    return i;
}

static VALUE batch_set_token(VALUE self, VALUE idx, VALUE value) {
    struct rb_batch *b = batch_for_write(self);
    int i = token_index(b, idx, b->batch.token, "token");
    b->batch.token[i] = NUM2INT(value);
    return INT2NUM(b->batch.token[i]);
}

static VALUE batch_get_token(VALUE self, VALUE idx) {
    struct rb_batch *b = batch_get(self);
    return INT2NUM(b->batch.token[token_index(b, idx, b->batch.token, "token")]);
}

static VALUE batch_set_pos(VALUE self, VALUE idx, VALUE value) {
    struct rb_batch *b = batch_for_write(self);
    int i = token_index(b, idx, b->batch.pos, "pos");
    b->batch.pos[i] = NUM2INT(value);
    return INT2NUM(b->batch.pos[i]);
}

static VALUE batch_get_pos(VALUE self, VALUE idx) {
    struct rb_batch *b = batch_get(self);
    return INT2NUM(b->batch.pos[token_index(b, idx, b->batch.pos, "pos")]);
}

static VALUE batch_set_n_seq_id(VALUE self, VALUE idx, VALUE value) {
    struct rb_batch *b = batch_for_write(self);
    int i = token_index(b, idx, b->batch.n_seq_id, "n_seq_id");
    b->batch.n_seq_id[i] = NUM2INT(value);
    return INT2NUM(b->batch.n_seq_id[i]);
}

static VALUE batch_get_n_seq_id(VALUE self, VALUE idx) {
    struct rb_batch *b = batch_get(self);
    return INT2NUM(b->batch.n_seq_id[token_index(b, idx, b->batch.n_seq_id, "n_seq_id")]);
}

static llama_seq_id *seq_id_slot(struct rb_batch *b, VALUE i_value, VALUE j_value) {
    const int i = NUM2INT(i_value), j = NUM2INT(j_value);
    if (i < 0) rb_raise(rb_eArgError, "i must be greater or equal to 0");
    if (j < 0) rb_raise(rb_eArgError, "j must be greater or equal to 0");
    if (!b->batch.seq_id) rb_raise(rb_eIndexError, "this batch has no seq_id buffer (Batch.get_one batches carry only tokens)");
    if (i >= b->capacity) rb_raise(rb_eIndexError, "i %d is out of range (the batch holds %d tokens)", i, b->capacity);
    if (j >= b->max_n_seq) rb_raise(rb_eIndexError, "j %d is out of range (max_n_seq is %d)", j, b->max_n_seq);
    return &b->batch.seq_id[i][j];
}

static VALUE batch_set_seq_id(VALUE self, VALUE i, VALUE j, VALUE value) {
    llama_seq_id *slot = seq_id_slot(batch_for_write(self), i, j);
    *slot = NUM2INT(value);
    return INT2NUM(*slot);
}

static VALUE batch_get_seq_id(VALUE self, VALUE i, VALUE j) {
    return INT2NUM(*seq_id_slot(batch_get(self), i, j));
}

static VALUE batch_set_logits(VALUE self, VALUE idx, VALUE value) {
    struct rb_batch *b = batch_for_write(self);
    int i = token_index(b, idx, b->batch.logits, "logits");
    b->batch.logits[i] = RTEST(value) ? 1 : 0;
    return b->batch.logits[i] ? Qtrue : Qfalse;
}

static VALUE batch_get_logits(VALUE self, VALUE idx) {
    struct rb_batch *b = batch_get(self);
    return b->batch.logits[token_index(b, idx, b->batch.logits, "logits")] ? Qtrue : Qfalse;
}

/* ---- scalar fields -------------------------------------------------------------------------- */

static VALUE batch_get_n_tokens(VALUE self) {
    return INT2NUM(batch_get(self)->batch.n_tokens);
}

static VALUE batch_set_n_tokens(VALUE self, VALUE value) {
    struct rb_batch *b = batch_for_write(self);
    const int n = NUM2INT(value);
    if (n < 0 || n > b->capacity) {
        rb_raise(rb_eArgError, "n_tokens (%d) must be between 0 and the batch's capacity (%d)", n, b->capacity);
    }
    b->batch.n_tokens = n;
    return INT2NUM(n);
}

#define SCALAR_FIELD(name, field)                                                           \
    static VALUE batch_get_##name(VALUE self) { return INT2NUM(batch_get(self)->batch.field); } \
    static VALUE batch_set_##name(VALUE self, VALUE v) {                                    \
        struct rb_batch *b = batch_for_write(self);                                         \
        b->batch.field = NUM2INT(v);                                                        \
        return INT2NUM(b->batch.field);                                                     \
    }
SCALAR_FIELD(all_pos_zero, all_pos_0)
SCALAR_FIELD(all_pos_one, all_pos_1)
SCALAR_FIELD(all_seq_id, all_seq_id)
#undef SCALAR_FIELD

struct llama_batch rbllama_batch_for_decode(VALUE self, int **in_use) {
    struct rb_batch *b = batch_get(self);
    if (!b->batch.token && !b->batch.embd) rb_raise(rb_eRuntimeError, "Batch is not initialized");
    if (b->batch.n_tokens < 0 || b->batch.n_tokens > b->capacity) {
        rb_raise(rb_eArgError, "n_tokens (%d) exceeds the batch's capacity (%d)", b->batch.n_tokens, b->capacity);
    }
    /* the library reads seq_id[i][0 .. n_seq_id[i]-1]: keep that inside our buffers */
    if (b->batch.seq_id && b->batch.n_seq_id) {
        for (int32_t i = 0; i < b->batch.n_tokens; i++) {
            const int32_t n = b->batch.n_seq_id[i];
            if (n < 1 || n > b->max_n_seq) {
                rb_raise(rb_eArgError, "n_seq_id of token %d is %d: it must be between 1 and max_n_seq (%d)", i, n,
                         b->max_n_seq);
            }
        }
    }
    *in_use = &b->in_use;
    return b->batch;
}

void rbllama_init_batch(void) {
    VALUE k = rb_cLLaMABatch = rb_define_class_under(rb_mLLaMACpp, "Batch", rb_cObject);
    rb_define_alloc_func(k, batch_alloc);
    rb_define_singleton_method(k, "get_one", batch_s_get_one, -1);
    rb_define_method(k, "initialize", batch_initialize, -1);
    rb_define_method(k, "n_tokens", batch_get_n_tokens, 0);
    rb_define_method(k, "n_tokens=", batch_set_n_tokens, 1);
    rb_define_method(k, "all_pos_zero", batch_get_all_pos_zero, 0);
    rb_define_method(k, "all_pos_zero=", batch_set_all_pos_zero, 1);
    rb_define_method(k, "all_pos_one", batch_get_all_pos_one, 0);
    rb_define_method(k, "all_pos_one=", batch_set_all_pos_one, 1);
    rb_define_method(k, "all_seq_id", batch_get_all_seq_id, 0);
    rb_define_method(k, "all_seq_id=", batch_set_all_seq_id, 1);
    rb_define_method(k, "set_token", batch_set_token, 2);
    rb_define_method(k, "get_token", batch_get_token, 1);
    rb_define_method(k, "set_pos", batch_set_pos, 2);
    rb_define_method(k, "get_pos", batch_get_pos, 1);
    rb_define_method(k, "set_n_seq_id", batch_set_n_seq_id, 2);
    rb_define_method(k, "get_n_seq_id", batch_get_n_seq_id, 1);
    rb_define_method(k, "set_seq_id", batch_set_seq_id, 3);
    rb_define_method(k, "get_seq_id", batch_get_seq_id, 2);
    rb_define_method(k, "set_logits", batch_set_logits, 2);
    rb_define_method(k, "get_logits", batch_get_logits, 1);
}
