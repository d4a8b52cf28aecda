/*
 * LLaMACpp::Context (construction, decoding, outputs, KV cache, sessions,
 * timings) and LLaMACpp::Timings. The sampling methods are in rb_sampling.c.
 *
 * Decoding runs without the GVL; the context's abort callback polls a flag
 * that the unblocking function sets, so Ctrl-C and Thread#raise stop a long
 * decode within one graph node, and the library releases the KV cells the
 * stopped batch had claimed (the context stays usable).
 */
#include "rb_llama_cpp.h"

#include <string.h>

#include "core/log.h"

VALUE rb_cLLaMAContext;
VALUE rb_cLLaMATimings;

static void context_mark(void *p) {
    struct rbllama_context *rc = p;
    rb_gc_mark(rc->model);
}

static void context_free(void *p) {
    struct rbllama_context *rc = p;
    if (rc->ctx) llama_free(rc->ctx);
    if (rc->model_ref) rbllama_model_ref_release(rc->model_ref);
    xfree(rc);
}

static size_t context_memsize(const void *p) {
    return sizeof(struct rbllama_context);
}

static const rb_data_type_t context_type = {
    "LLaMACpp::Context", { context_mark, context_free, context_memsize, }, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE context_alloc(VALUE klass) {
    struct rbllama_context *rc;
    VALUE obj = TypedData_Make_Struct(klass, struct rbllama_context, &context_type, rc);
    rc->model = Qnil;
    atomic_init(&rc->cancel, false);
    return obj;
}

struct rbllama_context *rbllama_context_peek(VALUE self) {
    return rb_check_typeddata(self, &context_type);
}

struct rbllama_context *rbllama_context_get(VALUE self, VALUE klass) {
    struct rbllama_context *rc = rbllama_context_peek(self);
    if (!rc->ctx) rb_raise(klass, "LLaMA context is not initialized");
    if (rc->busy) rb_raise(rb_eRuntimeError, "LLaMA context is in use by another thread");
    return rc;
}

static struct rbllama_context *ctx_get(VALUE self) {
    return rbllama_context_get(self, rb_eRuntimeError);
}

static bool context_abort_requested(void *data) {
    return atomic_load((atomic_bool *)data);
}

struct new_context_job {
    struct rbllama_job job;
    struct llama_model *model;
    struct llama_context_params params;
    struct llama_context *ctx;
};

static void new_context_run(struct rbllama_job *job) {
    struct new_context_job *j = (struct new_context_job *)job;
    j->ctx = llama_new_context_with_model(j->model, j->params);
    job->ok = j->ctx != NULL;
    if (!job->ok) rbllama_job_take_error(job, "");
}

struct new_context_frame {
    struct new_context_job *job;
    struct rbllama_model_ref *ref;
    bool returned;
};

static VALUE new_context_body(VALUE arg) {
    struct new_context_frame *f = (struct new_context_frame *)arg;
    rbllama_job_run(&f->job->job, NULL, NULL);
    f->returned = true;
    return Qnil;
}

/* Without a context to hand it to (failure, or an interrupt unwinding), drop
 * the job's model reference, and the new context first. */
static VALUE new_context_leave(VALUE arg) {
    struct new_context_frame *f = (struct new_context_frame *)arg;
    if (f->returned && f->job->ctx) return Qnil;
    if (f->job->ctx) {
        llama_free(f->job->ctx);
        f->job->ctx = NULL;
    }
    rbllama_model_ref_release(f->ref);
    return Qnil;
}

static VALUE context_initialize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "model", "params" };
    VALUE kw[2];
    rbllama_scan_kwargs(argc, argv, names, 2, 0, kw);
    if (!rb_obj_is_kind_of(kw[0], rb_cLLaMAModel)) rb_raise(rb_eArgError, "model must be a Model");
    if (!rb_obj_is_kind_of(kw[1], rb_cLLaMAContextParams)) rb_raise(rb_eArgError, "params must be a ContextParams");
    struct rbllama_context *rc = rb_check_typeddata(self, &context_type);
    if (rc->ctx) rb_raise(rb_eRuntimeError, "LLaMA context is already initialized");
    struct rbllama_model_ref *ref = rbllama_model_ref(kw[0], "Model is empty");
    const struct llama_context_params params = *rbllama_context_params_get(kw[1]);

    /* allocating (and clearing) a large KV cache takes a while: without the GVL */
    struct new_context_job job = { .job = { .run = new_context_run }, .model = ref->model, .params = params };
    rbllama_model_ref_retain(ref); /* the context's reference, taken now: Model#free may run meanwhile */
    struct new_context_frame frame = { &job, ref, false };
    rb_ensure(new_context_body, (VALUE)&frame, new_context_leave, (VALUE)&frame);
    if (!job.ctx) rbllama_raise_library_error(rb_eRuntimeError, "Failed to initialize LLaMA context", job.job.err);
    struct llama_context *ctx = job.ctx;
    rc->ctx = ctx;
    rc->model_ref = ref;
    RB_OBJ_WRITE(self, &rc->model, kw[0]);
    rc->logits_all = params.logits_all;
    rc->embedding = params.embedding;
    llama_set_abort_callback(ctx, context_abort_requested, &rc->cancel);
    rb_iv_set(self, "@model", kw[0]);
    rb_iv_set(self, "@params", kw[1]);
    return self;
}

/* ---- decoding ------------------------------------------------------------------------ */

enum decode_kind { DECODE_BATCH, DECODE_EVAL_TOKENS, DECODE_EVAL_EMBD };

struct decode_job {
    struct rbllama_job job;
    struct llama_context *ctx;
    enum decode_kind kind;
    struct llama_batch batch;  /* DECODE_BATCH */
    llama_token *tokens;       /* DECODE_EVAL_TOKENS */
    float *embd;               /* DECODE_EVAL_EMBD */
    int32_t n_tokens, n_past;  /* DECODE_EVAL_* */
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void decode_run(struct rbllama_job *job) {
    struct decode_job *d = (struct decode_job *)job;
    int32_t r;
    switch (d->kind) {
    case DECODE_BATCH: r = llama_decode(d->ctx, d->batch); break;
    case DECODE_EVAL_TOKENS: r = llama_eval(d->ctx, d->tokens, d->n_tokens, d->n_past); break;
    default: r = llama_eval_embd(d->ctx, d->embd, d->n_tokens, d->n_past); break;
    }
    job->ok = r == 0;
    if (r == 1) {
        snprintf(job->err, sizeof job->err, "no KV cache slot for the batch (the context of %u cells is full)",
                 llama_n_ctx(d->ctx));
    } else if (r != 0) {
        rbllama_job_take_error(job, "");
    }
}
#pragma GCC diagnostic pop

struct decode_frame {
    struct decode_job *d;
    struct rbllama_context *rc;
    int *batch_in_use; /* NULL unless a Batch object is read */
};

static VALUE decode_body(VALUE arg) {
    struct decode_frame *f = (struct decode_frame *)arg;
    f->d->job.cancel = &f->rc->cancel;
    rbllama_job_run(&f->d->job, &f->rc->busy, &f->rc->model_ref->running);
    return Qnil;
}

static VALUE decode_leave(VALUE arg) {
    struct decode_frame *f = (struct decode_frame *)arg;
    if (f->batch_in_use) (*f->batch_in_use)--;
    xfree(f->d->tokens);
    xfree(f->d->embd);
    return Qnil;
}

/* Runs the decode; the job's buffers (tokens/embd) are freed here. */
static void decode_now(struct rbllama_context *rc, struct decode_job *d, int *batch_in_use) {
    if (rc->model_ref->lora_running) {
        xfree(d->tokens);
        xfree(d->embd);
        rb_raise(rb_eRuntimeError, "LLaMA model is in use by apply_lora_from_file in another thread");
    }
    d->job.run = decode_run;
    d->ctx = rc->ctx;
    struct decode_frame frame = { d, rc, batch_in_use };
    if (batch_in_use) (*batch_in_use)++;
    rb_ensure(decode_body, (VALUE)&frame, decode_leave, (VALUE)&frame);
}

static VALUE context_decode(VALUE self, VALUE batch) {
    struct rbllama_context *rc = ctx_get(self);
    if (!rb_obj_is_kind_of(batch, rb_cLLaMABatch)) rb_raise(rb_eArgError, "batch must be a Batch");
    int *in_use;
    struct decode_job d = { .kind = DECODE_BATCH };
    d.batch = rbllama_batch_for_decode(batch, &in_use);
    /* the row Context#logits will read: without per-token flags the library
     * keeps the last token's logits as row 0, else the last flagged token's */
    int32_t logits_row = 0;
    if (d.batch.logits) {
        logits_row = -1;
        for (int32_t i = 0; i < d.batch.n_tokens; i++) {
            if (d.batch.logits[i]) logits_row = i;
        }
    }
    decode_now(rc, &d, in_use);
    RB_GC_GUARD(batch);
    if (!d.job.ok) rbllama_raise_library_error(rb_eRuntimeError, "Failed to decode", d.job.err);
    rc->evaluated = true;
    rc->n_tokens = d.batch.n_tokens;
    rc->logits_row = logits_row;
    rb_iv_set(self, "@n_tokens", INT2NUM(d.batch.n_tokens));
    rb_iv_set(self, "@has_evaluated", Qtrue);
    return Qnil;
}

static void after_eval(VALUE self, struct rbllama_context *rc, int32_t n_tokens) {
    rc->evaluated = true;
    rc->n_tokens = n_tokens;
    rc->logits_row = 0;
    rb_iv_set(self, "@n_tokens", INT2NUM(n_tokens));
    rb_iv_set(self, "@has_evaluated", Qtrue);
}

static int32_t eval_count(VALUE given, long available, const char *what) {
    if (given == Qundef) return (int32_t)available;
    rbllama_expect_integer(given, "n_tokens must be an integer");
    int n = NUM2INT(given);
    if (n < 0) rb_raise(rb_eArgError, "n_tokens must be a non-negative integer");
    if (n > available) rb_raise(rb_eArgError, "n_tokens (%d) is greater than the number of %s (%ld)", n, what, available);
    return n;
}

/* eval(tokens:, n_past:, n_tokens: tokens.size) — deprecated */
static VALUE context_eval(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "tokens", "n_past", "n_tokens" };
    VALUE kw[3];
    rbllama_scan_kwargs(argc, argv, names, 2, 1, kw);
    struct rbllama_context *rc = ctx_get(self);
    rb_warn("eval is deprecated. Use decode instead.");
    if (!RB_TYPE_P(kw[0], T_ARRAY)) rb_raise(rb_eArgError, "tokens must be an Array");
    rbllama_expect_integer(kw[1], "n_past must be an integer");
    const int32_t n_tokens = eval_count(kw[2], RARRAY_LEN(kw[0]), "tokens");
    for (long i = 0; i < RARRAY_LEN(kw[0]); i++) {
        if (!RB_INTEGER_TYPE_P(RARRAY_AREF(kw[0], i))) rb_raise(rb_eArgError, "tokens must be an array of integers");
    }
    struct decode_job d = { .kind = DECODE_EVAL_TOKENS, .n_tokens = n_tokens, .n_past = NUM2INT(kw[1]) };
    long n;
    d.tokens = rbllama_tokens_from_array(kw[0], &n);
    decode_now(rc, &d, NULL);
    if (!d.job.ok) rbllama_raise_library_error(rb_eRuntimeError, "Failed to evaluate", d.job.err);
    after_eval(self, rc, n_tokens);
    return Qnil;
}

/* eval_embd(embd:, n_past:, n_tokens: embd.size / n_embd) — deprecated */
static VALUE context_eval_embd(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "embd", "n_past", "n_tokens" };
    VALUE kw[3];
    rbllama_scan_kwargs(argc, argv, names, 2, 1, kw);
    struct rbllama_context *rc = ctx_get(self);
    rb_warn("eval_embd is deprecated. Use decode instead.");
    if (!RB_TYPE_P(kw[0], T_ARRAY)) rb_raise(rb_eArgError, "tokens must be an Array");
    rbllama_expect_integer(kw[1], "n_past must be an integer");
    const long n_floats = RARRAY_LEN(kw[0]);
    for (long i = 0; i < n_floats; i++) {
        if (!RB_FLOAT_TYPE_P(RARRAY_AREF(kw[0], i))) rb_raise(rb_eArgError, "embd must be an array of floats");
    }
    const int32_t n_embd = rc->model_ref->n_embd;
    const int32_t n_tokens = eval_count(kw[2], n_floats / n_embd, "embeddings");
    struct decode_job d = { .kind = DECODE_EVAL_EMBD, .n_tokens = n_tokens, .n_past = NUM2INT(kw[1]) };
    d.embd = ALLOC_N(float, n_floats > 0 ? n_floats : 1);
    for (long i = 0; i < n_floats; i++) d.embd[i] = (float)RFLOAT_VALUE(RARRAY_AREF(kw[0], i));
    decode_now(rc, &d, NULL);
    if (!d.job.ok) rbllama_raise_library_error(rb_eRuntimeError, "Failed to evaluate", d.job.err);
    after_eval(self, rc, n_tokens);
    return Qnil;
}

/* ---- outputs -------------------------------------------------------------------------- */

static VALUE context_logits(VALUE self) {
    struct rbllama_context *rc = ctx_get(self);
    if (!rc->evaluated) rb_raise(rb_eRuntimeError, "LLaMA context has not been evaluated");
    const long n_vocab = rc->model_ref->n_vocab;
    if (rc->logits_all) {
        return rbllama_floats_to_array(llama_get_logits(rc->ctx), (long)rc->n_tokens * n_vocab);
    }
    if (rc->logits_row < 0) rb_raise(rb_eRuntimeError, "the last batch requested no logits");
    const float *row = llama_get_logits_ith(rc->ctx, rc->logits_row);
    if (!row) rbllama_raise_library_error(rb_eRuntimeError, "no logits", error_last());
    return rbllama_floats_to_array(row, n_vocab);
}

static VALUE context_embeddings(VALUE self) {
    struct rbllama_context *rc = ctx_get(self);
    if (!rc->embedding) rb_raise(rb_eRuntimeError, "embedding parameter is false");
    if (!rc->evaluated) rb_raise(rb_eRuntimeError, "LLaMA context has not been evaluated");
    const float *embd = llama_get_embeddings(rc->ctx);
    if (!embd) rb_raise(rb_eRuntimeError, "no embeddings");
    return rbllama_floats_to_array(embd, rc->model_ref->n_embd);
}

static VALUE context_n_ctx(VALUE self) {
    return UINT2NUM(llama_n_ctx(ctx_get(self)->ctx));
}

static VALUE context_n_batch(VALUE self) {
    return UINT2NUM(llama_n_batch(ctx_get(self)->ctx));
}

/* ---- timings --------------------------------------------------------------------------- */

RBLLAMA_STRUCT_CLASS(timings, struct llama_timings, "LLaMACpp::Timings")

#define TIMING_READER(field, conv) \
    static VALUE timings_##field(VALUE self) { return conv(timings_get(self)->field); }
TIMING_READER(t_start_ms, DBL2NUM)
TIMING_READER(t_end_ms, DBL2NUM)
TIMING_READER(t_load_ms, DBL2NUM)
TIMING_READER(t_sample_ms, DBL2NUM)
TIMING_READER(t_p_eval_ms, DBL2NUM)
TIMING_READER(t_eval_ms, DBL2NUM)
TIMING_READER(n_sample, INT2NUM)
TIMING_READER(n_p_eval, INT2NUM)
TIMING_READER(n_eval, INT2NUM)
#undef TIMING_READER

static VALUE context_timings(VALUE self) {
    struct rbllama_context *rc = ctx_get(self);
    VALUE obj = timings_alloc(rb_cLLaMATimings);
    *timings_get(obj) = llama_get_timings(rc->ctx);
    return obj;
}

static VALUE context_print_timings(VALUE self) {
    llama_print_timings(ctx_get(self)->ctx);
    return Qnil;
}

static VALUE context_reset_timings(VALUE self) {
    llama_reset_timings(ctx_get(self)->ctx);
    return Qnil;
}

/* ---- KV cache ---------------------------------------------------------------------------- */

/* The KV functions return nothing: a rejected argument shows as the library's last error. */
static void raise_if_library_refused(const char *what) {
    const char *msg = error_last();
    if (msg[0]) rbllama_raise_library_error(rb_eArgError, what, msg);
}

static VALUE context_kv_cache_token_count(VALUE self) {
    return INT2NUM(llama_get_kv_cache_token_count(ctx_get(self)->ctx));
}

static VALUE context_kv_cache_clear(VALUE self) {
    struct rbllama_context *rc = ctx_get(self);
    error_clear();
    llama_kv_cache_clear(rc->ctx);
    raise_if_library_refused("kv_cache_clear");
    return Qnil;
}

static VALUE context_kv_cache_seq_rm(VALUE self, VALUE seq_id, VALUE p0, VALUE p1) {
    struct rbllama_context *rc = ctx_get(self);
    error_clear();
    llama_kv_cache_seq_rm(rc->ctx, NUM2INT(seq_id), NUM2INT(p0), NUM2INT(p1));
    raise_if_library_refused("kv_cache_seq_rm");
    return Qnil;
}

static VALUE context_kv_cache_seq_cp(VALUE self, VALUE src, VALUE dst, VALUE p0, VALUE p1) {
    struct rbllama_context *rc = rbllama_context_get(self, rb_eArgError);
    error_clear();
    llama_kv_cache_seq_cp(rc->ctx, NUM2INT(src), NUM2INT(dst), NUM2INT(p0), NUM2INT(p1));
    raise_if_library_refused("kv_cache_seq_cp");
    return Qnil;
}

static VALUE context_kv_cache_seq_keep(VALUE self, VALUE seq_id) {
    struct rbllama_context *rc = rbllama_context_get(self, rb_eArgError);
    error_clear();
    llama_kv_cache_seq_keep(rc->ctx, NUM2INT(seq_id));
    raise_if_library_refused("kv_cache_seq_keep");
    return Qnil;
}

static VALUE context_kv_cache_seq_shift(VALUE self, VALUE seq_id, VALUE p0, VALUE p1, VALUE delta) {
    struct rbllama_context *rc = rbllama_context_get(self, rb_eArgError);
    error_clear();
    llama_kv_cache_seq_shift(rc->ctx, NUM2INT(seq_id), NUM2INT(p0), NUM2INT(p1), NUM2INT(delta));
    raise_if_library_refused("kv_cache_seq_shift");
    return Qnil;
}

static VALUE context_kv_cache_seq_div(VALUE self, VALUE seq_id, VALUE p0, VALUE p1, VALUE d) {
    struct rbllama_context *rc = rbllama_context_get(self, rb_eArgError);
    const int divisor = NUM2INT(d);
    if (divisor <= 0) rb_raise(rb_eArgError, "d must be a positive integer");
    error_clear();
    llama_kv_cache_seq_div(rc->ctx, NUM2INT(seq_id), NUM2INT(p0), NUM2INT(p1), divisor);
    raise_if_library_refused("kv_cache_seq_div");
    return Qnil;
}

static VALUE context_set_rng_seed(VALUE self, VALUE seed) {
    struct rbllama_context *rc = ctx_get(self);
    if (!RB_INTEGER_TYPE_P(seed) || NUM2LL(seed) < 0) rb_raise(rb_eArgError, "seed must be a non-negative integer");
    const long long value = NUM2LL(seed);
    if (value > (long long)UINT32_MAX) rb_raise(rb_eRangeError, "seed %lld is out of the uint32 range", value);
    llama_set_rng_seed(rc->ctx, (uint32_t)value);
    return Qnil;
}

/* ---- sessions ------------------------------------------------------------------------------ */

struct session_job {
    struct rbllama_job job;
    struct llama_context *ctx;
    bool save;
    char *path;
    llama_token *tokens;
    size_t n_tokens; /* save: tokens to write; load: capacity in, count out */
};

static void session_run(struct rbllama_job *job) {
    struct session_job *s = (struct session_job *)job;
    if (s->save) {
        job->ok = llama_save_session_file(s->ctx, s->path, s->tokens, s->n_tokens);
    } else {
        size_t count = 0;
        job->ok = llama_load_session_file(s->ctx, s->path, s->tokens, s->n_tokens, &count);
        s->n_tokens = count;
    }
    if (!job->ok) rbllama_job_take_error(job, "");
}

struct session_frame {
    struct session_job *s;
    struct rbllama_context *rc;
    VALUE loaded_tokens; /* load: the session's prompt tokens */
};

static VALUE session_body(VALUE arg) {
    struct session_frame *f = (struct session_frame *)arg;
    rbllama_job_run(&f->s->job, &f->rc->busy, NULL);
    if (!f->s->save && f->s->job.ok) f->loaded_tokens = rbllama_tokens_to_array(f->s->tokens, (long)f->s->n_tokens);
    return Qnil;
}

static VALUE session_cleanup(VALUE arg) {
    struct session_frame *f = (struct session_frame *)arg;
    xfree(f->s->path);
    xfree(f->s->tokens);
    return Qnil;
}

/* Runs the job; frees its buffers. Returns the loaded tokens (load) or nil. */
static VALUE session_now(struct rbllama_context *rc, struct session_job *s) {
    s->job.run = session_run;
    s->ctx = rc->ctx;
    struct session_frame frame = { s, rc, Qnil };
    rb_ensure(session_body, (VALUE)&frame, session_cleanup, (VALUE)&frame);
    return frame.loaded_tokens;
}

static VALUE context_load_session_file(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "session_path" };
    VALUE kw[1];
    rbllama_scan_kwargs(argc, argv, names, 1, 0, kw);
    struct rbllama_context *rc = ctx_get(self);
    if (!RB_TYPE_P(kw[0], T_STRING)) rb_raise(rb_eArgError, "session_path must be a String");
    struct session_job s = { .save = false };
    /* room for a whole context of tokens (0.12.2 used params.n_ctx, which may be 0) */
    s.n_tokens = llama_n_ctx(rc->ctx);
    s.path = rbllama_path_dup(kw[0], "session_path must be a String");
    s.tokens = ALLOC_N(llama_token, s.n_tokens > 0 ? s.n_tokens : 1);
    VALUE tokens = session_now(rc, &s);
    if (!s.job.ok) rbllama_raise_library_error(rb_eRuntimeError, "Failed to load session file", s.job.err);
    /* the state carries the saved last-token logits */
    if (!rc->logits_all && RARRAY_LEN(tokens) > 0) after_eval(self, rc, 1);
    return tokens;
}

static VALUE context_save_session_file(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "session_path", "session_tokens" };
    VALUE kw[2];
    rbllama_scan_kwargs(argc, argv, names, 2, 0, kw);
    struct rbllama_context *rc = ctx_get(self);
    if (!RB_TYPE_P(kw[0], T_STRING)) rb_raise(rb_eArgError, "session_path must be a String");
    if (!RB_TYPE_P(kw[1], T_ARRAY)) rb_raise(rb_eArgError, "session_tokens must be an Array");
    struct session_job s = { .save = true };
    const char *path = StringValueCStr(kw[0]); /* raises before anything is allocated */
    long n;
    s.tokens = rbllama_tokens_from_array(kw[1], &n);
    s.n_tokens = (size_t)n;
    s.path = ruby_strdup(path);
    session_now(rc, &s);
    if (!s.job.ok) rbllama_raise_library_error(rb_eRuntimeError, "Failed to save session file", s.job.err);
    return Qnil;
}

void rbllama_init_context(void) {
    VALUE k = rb_cLLaMATimings = rb_define_class_under(rb_mLLaMACpp, "Timings", rb_cObject);
    rb_define_alloc_func(k, timings_alloc);
    rb_define_method(k, "t_start_ms", timings_t_start_ms, 0);
    rb_define_method(k, "t_end_ms", timings_t_end_ms, 0);
    rb_define_method(k, "t_load_ms", timings_t_load_ms, 0);
    rb_define_method(k, "t_sample_ms", timings_t_sample_ms, 0);
    rb_define_method(k, "t_p_eval_ms", timings_t_p_eval_ms, 0);
    rb_define_method(k, "t_eval_ms", timings_t_eval_ms, 0);
    rb_define_method(k, "n_sample", timings_n_sample, 0);
    rb_define_method(k, "n_p_eval", timings_n_p_eval, 0);
    rb_define_method(k, "n_eval", timings_n_eval, 0);

    k = rb_cLLaMAContext = rb_define_class_under(rb_mLLaMACpp, "Context", rb_cObject);
    rb_define_alloc_func(k, context_alloc);
    rb_define_attr(k, "model", 1, 0);
    rb_define_method(k, "initialize", context_initialize, -1);
    rb_define_method(k, "decode", context_decode, 1);
    rb_define_method(k, "eval", context_eval, -1);
    rb_define_method(k, "eval_embd", context_eval_embd, -1);
    rb_define_method(k, "logits", context_logits, 0);
    rb_define_method(k, "embeddings", context_embeddings, 0);
    rb_define_method(k, "n_ctx", context_n_ctx, 0);
    rb_define_method(k, "n_batch", context_n_batch, 0);
    rb_define_method(k, "timings", context_timings, 0);
    rb_define_method(k, "print_timings", context_print_timings, 0);
    rb_define_method(k, "reset_timings", context_reset_timings, 0);
    rb_define_method(k, "kv_cache_token_count", context_kv_cache_token_count, 0);
    rb_define_method(k, "kv_cache_clear", context_kv_cache_clear, 0);
    rb_define_method(k, "kv_cache_seq_rm", context_kv_cache_seq_rm, 3);
    rb_define_method(k, "kv_cache_seq_cp", context_kv_cache_seq_cp, 4);
    rb_define_method(k, "kv_cache_seq_keep", context_kv_cache_seq_keep, 1);
    rb_define_method(k, "kv_cache_seq_shift", context_kv_cache_seq_shift, 4);
    rb_define_method(k, "kv_cache_seq_div", context_kv_cache_seq_div, 4);
    rb_define_method(k, "set_rng_seed", context_set_rng_seed, 1);
    rb_define_method(k, "load_session_file", context_load_session_file, -1);
    rb_define_method(k, "save_session_file", context_save_session_file, -1);
}
