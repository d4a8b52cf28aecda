/*
 * LLaMACpp::Model: a loaded GGUF model (vocabulary, metadata, weights).
 *
 * The llama_model lives in a reference-counted rbllama_model_ref shared
 * with the contexts made from it, so Model#free (or GC) while a context
 * still runs never frees weights under it.
 *
 * Loading runs on a separate native thread while the calling Ruby thread
 * waits without the GVL: progress reports wake it up to run the block (with
 * the GVL, outside the library's frames), and an interrupt or an exception
 * from the block makes the progress callback return false, which stops the
 * load; the loader thread is joined before the exception propagates.
 */
#include "rb_llama_cpp.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "core/log.h"

VALUE rb_cLLaMAModel;

struct rb_model {
    struct rbllama_model_ref *ref; /* NULL: empty (never loaded, or freed) */
};

void rbllama_model_ref_retain(struct rbllama_model_ref *ref) {
    ref->refs++;
}

void rbllama_model_ref_release(struct rbllama_model_ref *ref) {
    if (--ref->refs > 0) return;
    llama_free_model(ref->model);
    xfree(ref);
}

static void model_free(void *p) {
    struct rb_model *m = p;
    if (m->ref) rbllama_model_ref_release(m->ref);
    xfree(m);
}

static size_t model_memsize(const void *p) {
    return sizeof(struct rb_model);
}

static const rb_data_type_t model_type = {
    "LLaMACpp::Model", { NULL, model_free, model_memsize, }, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY
};

static VALUE model_alloc(VALUE klass) {
    struct rb_model *m;
    return TypedData_Make_Struct(klass, struct rb_model, &model_type, m);
}

static struct rb_model *model_get(VALUE self) {
    return rb_check_typeddata(self, &model_type);
}

struct rbllama_model_ref *rbllama_model_ref(VALUE model, const char *empty_message) {
    struct rb_model *m = model_get(model);
    if (!m->ref) rb_raise(rb_eRuntimeError, "%s", empty_message);
    return m->ref;
}

/* The loaded model for the vocabulary and metadata methods. */
static struct llama_model *loaded(VALUE self) {
    return rbllama_model_ref(self, "LLaMA model is not initialized")->model;
}

/* ---- loading ------------------------------------------------------------------- */

struct model_loader {
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    char *path;
    struct llama_model_params params;
    atomic_bool cancel;    /* the progress callback returns false once set */
    /* under mutex */
    bool done;             /* the loader thread has finished */
    bool wake;             /* the unblocking function asks the Ruby thread to look */
    bool progress_pending; /* a progress report not yet given to the block */
    float progress;
    /* written by the loader thread before `done` */
    struct llama_model *model;
    char err[512];
    /* Ruby side */
    VALUE block;
    bool cancelled_by_block;
    bool returned; /* the wait loop ended normally: the caller takes the model */
};

static bool loader_progress(float progress, void *data) {
    struct model_loader *l = data;
    pthread_mutex_lock(&l->mutex);
    l->progress = progress;
    l->progress_pending = true;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mutex);
    return !atomic_load(&l->cancel);
}

static void *loader_main(void *arg) {
    struct model_loader *l = arg;
    error_clear();
    l->model = llama_load_model_from_file(l->path, l->params);
    if (!l->model) snprintf(l->err, sizeof l->err, "%s", error_last());
    pthread_mutex_lock(&l->mutex);
    l->done = true;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mutex);
    return NULL;
}

static void *loader_wait(void *arg) {
    struct model_loader *l = arg;
    pthread_mutex_lock(&l->mutex);
    while (!l->done && !l->progress_pending && !l->wake) pthread_cond_wait(&l->cond, &l->mutex);
    pthread_mutex_unlock(&l->mutex);
    return NULL;
}

static void loader_unblock(void *arg) {
    struct model_loader *l = arg;
    pthread_mutex_lock(&l->mutex);
    l->wake = true;
    pthread_cond_signal(&l->cond);
    pthread_mutex_unlock(&l->mutex);
}

static VALUE loader_loop(VALUE arg) {
    struct model_loader *l = (struct model_loader *)arg;
    for (;;) {
        /* raises a pending interrupt on return (loader_finish then stops the loader) */
        rb_nogvl(loader_wait, l, loader_unblock, l, 0);
        pthread_mutex_lock(&l->mutex);
        const bool done = l->done, pending = l->progress_pending;
        const float progress = l->progress;
        l->progress_pending = false;
        l->wake = false;
        pthread_mutex_unlock(&l->mutex);
        if (pending && !NIL_P(l->block) && !l->cancelled_by_block) {
            if (rb_funcall(l->block, rb_intern("call"), 1, DBL2NUM(progress)) == Qfalse) {
                l->cancelled_by_block = true;
                atomic_store(&l->cancel, true);
            }
        }
        if (done) break;
    }
    l->returned = true;
    return Qnil;
}

static VALUE loader_finish(VALUE arg) {
    struct model_loader *l = (struct model_loader *)arg;
    /* unwinding: stop the load at its next progress report */
    if (!l->returned) atomic_store(&l->cancel, true);
    pthread_join(l->thread, NULL);
    if (!l->returned && l->model) {
        llama_free_model(l->model);
        l->model = NULL;
    }
    pthread_cond_destroy(&l->cond);
    pthread_mutex_destroy(&l->mutex);
    xfree(l->path);
    return Qnil;
}

/* Loads path into the empty Model `self`; raises on failure. */
static void model_load_into(VALUE self, VALUE path, VALUE params) {
    struct model_loader l;
    memset(&l, 0, sizeof l);
    l.params = *rbllama_model_params_get(params);
    l.params.progress_callback = loader_progress;
    l.params.progress_callback_user_data = &l;
    l.params.kv_overrides = NULL;
    l.block = rb_block_given_p() ? rb_block_proc() : Qnil;
    atomic_init(&l.cancel, false);
    l.path = rbllama_path_dup(path, "model_path must be a string");
    pthread_mutex_init(&l.mutex, NULL);
    pthread_cond_init(&l.cond, NULL);

    /* the loader thread takes no signals: they belong to Ruby's threads */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&l.thread, NULL, loader_main, &l);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        pthread_cond_destroy(&l.cond);
        pthread_mutex_destroy(&l.mutex);
        xfree(l.path);
        rb_raise(rb_eRuntimeError, "Failed to initialize LLaMA model: cannot start the loader thread (%s)",
                 strerror(rc));
    }
    rb_ensure(loader_loop, (VALUE)&l, loader_finish, (VALUE)&l);
    RB_GC_GUARD(l.block);

    if (l.cancelled_by_block && l.model) { /* the load had finished by the time the block said no */
        llama_free_model(l.model);
        l.model = NULL;
    }
    if (!l.model) {
        rbllama_raise_library_error(rb_eRuntimeError, "Failed to initialize LLaMA model",
                                    l.cancelled_by_block ? "loading was cancelled by the progress block" : l.err);
    }
    if (model_get(self)->ref) { /* the progress block loaded this Model meanwhile */
        llama_free_model(l.model);
        rb_raise(rb_eRuntimeError, "LLaMA model is already loaded");
    }
    struct rbllama_model_ref *ref = ALLOC(struct rbllama_model_ref);
    ref->model = l.model;
    ref->refs = 1;
    ref->running = 0;
    ref->lora_running = false;
    ref->n_vocab = llama_n_vocab(l.model);
    ref->n_embd = llama_n_embd(l.model);
    model_get(self)->ref = ref;
    rb_iv_set(self, "@params", params);
}

static void scan_load_args(int argc, VALUE *argv, VALUE *path, VALUE *params, const char *params_message) {
    static const char *const names[] = { "model_path", "params" };
    VALUE kw[2];
    rbllama_scan_kwargs(argc, argv, names, 2, 0, kw);
    if (!RB_TYPE_P(kw[0], T_STRING)) rb_raise(rb_eArgError, "model_path must be a string");
    if (!rb_obj_is_kind_of(kw[1], rb_cLLaMAModelParams)) rb_raise(rb_eArgError, "%s", params_message);
    *path = kw[0];
    *params = kw[1];
}

static VALUE model_initialize(int argc, VALUE *argv, VALUE self) {
    VALUE path, params;
    scan_load_args(argc, argv, &path, &params, "params must be a ModelParams");
    if (model_get(self)->ref) rb_raise(rb_eRuntimeError, "LLaMA model is already loaded");
    model_load_into(self, path, params);
    return self;
}

static VALUE model_load(int argc, VALUE *argv, VALUE self) {
    VALUE path, params;
    scan_load_args(argc, argv, &path, &params, "params must be a LLaMAModelParams");
    if (model_get(self)->ref) rb_raise(rb_eRuntimeError, "LLaMA model is already loaded");
    model_load_into(self, path, params);
    return Qnil;
}

static VALUE model_free_now(VALUE self) {
    struct rb_model *m = model_get(self);
    if (m->ref) {
        struct rbllama_model_ref *ref = m->ref;
        m->ref = NULL;
        rbllama_model_ref_release(ref);
    }
    rb_iv_set(self, "@params", Qnil);
    return Qnil;
}

static VALUE model_empty_p(VALUE self) {
    return model_get(self)->ref ? Qfalse : Qtrue;
}

/* ---- LoRA ----------------------------------------------------------------------- */

struct lora_job {
    struct rbllama_job job;
    struct llama_model *model;
    char *lora_path;
    char *base_path;
    float scale;
    int32_t n_threads;
};

static void lora_run(struct rbllama_job *job) {
    struct lora_job *j = (struct lora_job *)job;
    job->ok = llama_model_apply_lora_from_file(j->model, j->lora_path, j->scale, j->base_path, j->n_threads) == 0;
    if (!job->ok) rbllama_job_take_error(job, "");
}

struct lora_frame {
    struct lora_job *j;
    struct rbllama_model_ref *ref;
};

static VALUE lora_body(VALUE arg) {
    struct lora_frame *f = (struct lora_frame *)arg;
    rbllama_job_run(&f->j->job, &f->ref->lora_running, NULL);
    return Qnil;
}

static VALUE lora_cleanup(VALUE arg) {
    struct lora_frame *f = (struct lora_frame *)arg;
    xfree(f->j->lora_path);
    xfree(f->j->base_path);
    rbllama_model_ref_release(f->ref);
    return Qnil;
}

static VALUE model_apply_lora_from_file(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "lora_path", "scale", "base_model_path", "n_threads" };
    VALUE kw[4];
    rbllama_scan_kwargs(argc, argv, names, 1, 3, kw);
    if (!RB_TYPE_P(kw[0], T_STRING)) rb_raise(rb_eArgError, "lora_path must be a string");
    if (kw[2] != Qundef && !NIL_P(kw[2]) && !RB_TYPE_P(kw[2], T_STRING)) {
        rb_raise(rb_eArgError, "base_model_path must be a string");
    }
    if (kw[3] != Qundef) rbllama_expect_integer(kw[3], "n_threads must be an integer");
    if (kw[1] != Qundef) rbllama_expect_float(kw[1], "scale must be a float");
    struct rbllama_model_ref *ref = rbllama_model_ref(self, "LLaMA model is not initialized");
    if (ref->running > 0 || ref->lora_running) {
        rb_raise(rb_eRuntimeError, "LLaMA model is in use by a decode or LoRA application in another thread");
    }
    struct lora_job j = { .job = { .run = lora_run } };
    j.model = ref->model;
    j.scale = kw[1] == Qundef ? 1.0f : (float)NUM2DBL(kw[1]);
    j.n_threads = kw[3] == Qundef ? 1 : NUM2INT(kw[3]);
    j.lora_path = rbllama_path_dup(kw[0], "lora_path must be a string");
    j.base_path = kw[2] == Qundef || NIL_P(kw[2]) ? NULL : rbllama_path_dup(kw[2], "base_model_path must be a string");
    rbllama_model_ref_retain(ref); /* Model#free from another thread must wait for us */
    struct lora_frame frame = { &j, ref };
    rb_ensure(lora_body, (VALUE)&frame, lora_cleanup, (VALUE)&frame);
    if (!j.job.ok) rbllama_raise_library_error(rb_eRuntimeError, "Failed to apply LoRA", j.job.err);
    return Qnil;
}

/* ---- metadata ---------------------------------------------------------------------- */

static VALUE model_n_vocab(VALUE self) {
    return INT2NUM(llama_n_vocab(loaded(self)));
}

static VALUE model_n_ctx_train(VALUE self) {
    return INT2NUM(llama_n_ctx_train(loaded(self)));
}

static VALUE model_n_embd(VALUE self) {
    return INT2NUM(llama_n_embd(loaded(self)));
}

static VALUE model_rope_freq_scale_train(VALUE self) {
    return DBL2NUM(llama_rope_freq_scale_train(loaded(self)));
}

static VALUE model_desc(VALUE self) {
    char buf[256];
    int32_t n = llama_model_desc(loaded(self), buf, sizeof buf);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof buf) n = (int32_t)sizeof buf - 1;
    return rb_utf8_str_new(buf, n);
}

static VALUE model_size(VALUE self) {
    return ULL2NUM(llama_model_size(loaded(self)));
}

static VALUE model_n_params(VALUE self) {
    return ULL2NUM(llama_model_n_params(loaded(self)));
}

/* ---- vocabulary ---------------------------------------------------------------------- */

static llama_token checked_token_id(VALUE self, VALUE token_id) {
    const int32_t n_vocab = rbllama_model_ref(self, "LLaMA model is not initialized")->n_vocab;
    int id = NUM2INT(token_id);
    if (id < 0 || id >= n_vocab) rb_raise(rb_eIndexError, "token id %d is out of range (0...%d)", id, n_vocab);
    return id;
}

static VALUE model_token_text(VALUE self, VALUE token_id) {
    const char *text = llama_token_get_text(loaded(self), checked_token_id(self, token_id));
    return rb_utf8_str_new_cstr(text ? text : "");
}

static VALUE model_token_score(VALUE self, VALUE token_id) {
    return DBL2NUM(llama_token_get_score(loaded(self), checked_token_id(self, token_id)));
}

static VALUE model_token_type(VALUE self, VALUE token_id) {
    return INT2NUM(llama_token_get_type(loaded(self), checked_token_id(self, token_id)));
}

static VALUE model_token_bos(VALUE self) { return INT2NUM(llama_token_bos(loaded(self))); }
static VALUE model_token_eos(VALUE self) { return INT2NUM(llama_token_eos(loaded(self))); }
static VALUE model_token_nl(VALUE self) { return INT2NUM(llama_token_nl(loaded(self))); }
static VALUE model_token_prefix(VALUE self) { return INT2NUM(llama_token_prefix(loaded(self))); }
static VALUE model_token_middle(VALUE self) { return INT2NUM(llama_token_middle(loaded(self))); }
static VALUE model_token_suffix(VALUE self) { return INT2NUM(llama_token_suffix(loaded(self))); }
static VALUE model_token_eot(VALUE self) { return INT2NUM(llama_token_eot(loaded(self))); }

/* -1 (the model does not say) means "yes" for SPM vocabularies, as llama.cpp decides. */
static VALUE model_add_bos_token_p(VALUE self) {
    struct llama_model *model = loaded(self);
    int32_t add = llama_add_bos_token(model);
    if (add < 0) return llama_vocab_type(model) == LLAMA_VOCAB_TYPE_SPM ? Qtrue : Qfalse;
    return add ? Qtrue : Qfalse;
}

static VALUE model_add_eos_token_p(VALUE self) {
    return llama_add_eos_token(loaded(self)) == 1 ? Qtrue : Qfalse;
}

static VALUE model_token_to_piece(VALUE self, VALUE token) {
    if (!RB_INTEGER_TYPE_P(token)) rb_raise(rb_eArgError, "token must be an integer");
    struct rbllama_model_ref *ref = rbllama_model_ref(self, "LLaMA model is not initialized");
    int id = NUM2INT(token);
    if (id < 0 || id >= ref->n_vocab) return rb_utf8_str_new_cstr("");
    char small[64];
    int32_t n = llama_token_to_piece(ref->model, id, small, (int32_t)sizeof small);
    if (n >= 0) return rb_utf8_str_new(small, n);
    VALUE str = rb_utf8_str_new(NULL, -n);
    n = llama_token_to_piece(ref->model, id, RSTRING_PTR(str), (int32_t)RSTRING_LEN(str));
    if (n < 0) rb_raise(rb_eRuntimeError, "failed to convert");
    rb_str_set_len(str, n);
    return str;
}

/* tokenize(text = nil, text:, n_max_tokens: text.bytesize + (add_bos ? 1 : 0), add_bos: false, special: false) */
static VALUE model_tokenize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "text", "n_max_tokens", "add_bos", "special" };
    VALUE positional = Qnil, kwargs = Qnil, kw[4];
    const bool has_positional = rb_scan_args(argc, argv, "01:", &positional, &kwargs) == 1;
    /* with a positional text every keyword is optional (text: then is an error) */
    rbllama_get_kwargs(kwargs, names, has_positional ? 0 : 1, has_positional ? 4 : 3, kw);
    VALUE text = has_positional ? positional : kw[0];
    VALUE n_max = kw[1];
    if (has_positional && kw[0] != Qundef) rb_raise(rb_eArgError, "text given both positionally and as text:");
    if (!RB_TYPE_P(text, T_STRING)) rb_raise(rb_eArgError, "text must be a String");
    if (n_max != Qundef) rbllama_expect_integer(n_max, "n_max_tokens must be an integer");
    if (kw[2] != Qundef) rbllama_expect_boolean(kw[2], "add_bos must be a boolean");
    if (kw[3] != Qundef) rbllama_expect_boolean(kw[3], "special must be a boolean");
    const bool add_bos = kw[2] == Qtrue, special = kw[3] == Qtrue;
    struct llama_model *model = loaded(self);

    const long text_len = RSTRING_LEN(text);
    if (text_len > INT32_MAX - 16) rb_raise(rb_eArgError, "text is too long (%ld bytes)", text_len);
    const bool explicit_max = n_max != Qundef;
    const long limit = explicit_max ? NUM2INT(n_max) : text_len + (add_bos ? 1 : 0);
    if (limit < 0) rb_raise(rb_eArgError, "n_max_tokens must be a non-negative integer");
    /* no tokenizer makes more than one token per byte plus BOS and the SPM space */
    long capacity = limit < text_len + 2 ? limit : text_len + 2;
    for (;;) {
        VALUE buf = rb_str_buf_new((capacity > 0 ? capacity : 1) * (long)sizeof(llama_token));
        llama_token *tokens = (llama_token *)RSTRING_PTR(buf);
        int32_t n = llama_tokenize(model, RSTRING_PTR(text), (int32_t)text_len, tokens, (int32_t)capacity,
                                   add_bos, special);
        if (n >= 0) {
            VALUE result = rbllama_tokens_to_array(tokens, n);
            RB_GC_GUARD(buf);
            RB_GC_GUARD(text);
            return result;
        }
        const long needed = -(long)n;
        /* 0.12.2's default capacity is too small for inputs like "\n": take what is needed */
        if (explicit_max && needed > limit) {
            rb_raise(rb_eRuntimeError,
                     "failed to tokenize. The numebr of tokens (%ld) is greater than n_max_tokens.", needed);
        }
        capacity = needed;
    }
}

void rbllama_init_model(void) {
    VALUE k = rb_cLLaMAModel = rb_define_class_under(rb_mLLaMACpp, "Model", rb_cObject);
    rb_define_alloc_func(k, model_alloc);
    rb_define_attr(k, "params", 1, 0);
    rb_define_method(k, "initialize", model_initialize, -1);
    rb_define_method(k, "empty?", model_empty_p, 0);
    rb_define_method(k, "free", model_free_now, 0);
    rb_define_method(k, "load", model_load, -1);
    rb_define_method(k, "apply_lora_from_file", model_apply_lora_from_file, -1);
    rb_define_method(k, "n_vocab", model_n_vocab, 0);
    rb_define_method(k, "n_ctx_train", model_n_ctx_train, 0);
    rb_define_method(k, "n_embd", model_n_embd, 0);
    rb_define_method(k, "rope_freq_scale_train", model_rope_freq_scale_train, 0);
    rb_define_method(k, "token_to_piece", model_token_to_piece, 1);
    rb_define_method(k, "tokenize", model_tokenize, -1);
    rb_define_method(k, "desc", model_desc, 0);
    rb_define_method(k, "size", model_size, 0);
    rb_define_method(k, "n_params", model_n_params, 0);
    rb_define_method(k, "text", model_token_text, 1);
    rb_define_method(k, "score", model_token_score, 1);
    rb_define_method(k, "type", model_token_type, 1);
    rb_define_method(k, "token_bos", model_token_bos, 0);
    rb_define_method(k, "token_eos", model_token_eos, 0);
    rb_define_method(k, "token_nl", model_token_nl, 0);
    rb_define_method(k, "add_bos_token?", model_add_bos_token_p, 0);
    rb_define_method(k, "add_eos_token?", model_add_eos_token_p, 0);
    rb_define_method(k, "token_prefix", model_token_prefix, 0);
    rb_define_method(k, "token_middle", model_token_middle, 0);
    rb_define_method(k, "token_suffix", model_token_suffix, 0);
    rb_define_method(k, "token_eot", model_token_eot, 0);
}
