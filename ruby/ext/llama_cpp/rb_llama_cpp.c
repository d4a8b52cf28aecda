/*
 * The LLaMACpp module: constants, module functions, argument helpers and
 * the runner for work done without the GVL.
 */
#include "rb_llama_cpp.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

VALUE rb_mLLaMACpp;

/* ---- argument helpers ------------------------------------------------------- */

#define RBLLAMA_MAX_KWARGS 8

void rbllama_get_kwargs(VALUE kwargs, const char *const *names, int n_required, int n_optional, VALUE *values) {
    ID ids[RBLLAMA_MAX_KWARGS];
    const int n = n_required + n_optional;
    for (int i = 0; i < n; i++) ids[i] = rb_intern(names[i]);
    rb_get_kwargs(kwargs, ids, n_required, n_optional, values);
}

void rbllama_scan_kwargs(int argc, VALUE *argv, const char *const *names, int n_required, int n_optional,
                         VALUE *values) {
    VALUE kwargs = Qnil;
    rb_scan_args(argc, argv, ":", &kwargs);
    rbllama_get_kwargs(kwargs, names, n_required, n_optional, values);
}

void rbllama_expect_integer(VALUE v, const char *message) {
    if (!RB_INTEGER_TYPE_P(v)) rb_raise(rb_eArgError, "%s", message);
}

void rbllama_expect_float(VALUE v, const char *message) {
    if (!RB_FLOAT_TYPE_P(v)) rb_raise(rb_eArgError, "%s", message);
}

void rbllama_expect_boolean(VALUE v, const char *message) {
    if (v != Qtrue && v != Qfalse) rb_raise(rb_eArgError, "%s", message);
}

char *rbllama_path_dup(VALUE v, const char *message) {
    if (!RB_TYPE_P(v, T_STRING)) rb_raise(rb_eArgError, "%s", message);
    return ruby_strdup(StringValueCStr(v));
}

llama_token *rbllama_tokens_from_array(VALUE array, long *n_out) {
    const long n = RARRAY_LEN(array);
    /* check every item first, so nothing raises while the buffer is ours */
    for (long i = 0; i < n; i++) {
        VALUE item = RARRAY_AREF(array, i);
        if (!RB_INTEGER_TYPE_P(item)) rb_raise(rb_eTypeError, "token at index %ld must be an Integer", i);
        if (!FIXNUM_P(item) || FIX2LONG(item) < INT32_MIN || FIX2LONG(item) > INT32_MAX) {
            rb_raise(rb_eRangeError, "token at index %ld is out of the int32 range", i);
        }
    }
    llama_token *tokens = ALLOC_N(llama_token, n > 0 ? n : 1);
    for (long i = 0; i < n; i++) tokens[i] = (llama_token)FIX2LONG(RARRAY_AREF(array, i));
    *n_out = n;
    return tokens;
}

VALUE rbllama_tokens_to_array(const llama_token *tokens, long n) {
    VALUE array = rb_ary_new_capa(n);
    for (long i = 0; i < n; i++) rb_ary_push(array, INT2NUM(tokens[i]));
    return array;
}

VALUE rbllama_floats_to_array(const float *values, long n) {
    VALUE array = rb_ary_new_capa(n);
    for (long i = 0; i < n; i++) rb_ary_push(array, DBL2NUM(values[i]));
    return array;
}

void rbllama_raise_library_error(VALUE klass, const char *what, const char *library_message) {
    if (library_message && library_message[0]) {
        size_t len = strlen(library_message);
        while (len > 0 && (library_message[len - 1] == '\n' || library_message[len - 1] == ' ')) len--;
        rb_raise(klass, "%s: %.*s", what, (int)len, library_message);
    }
    rb_raise(klass, "%s", what);
}

/* ---- GVL-free jobs ---------------------------------------------------------- */

void rbllama_job_take_error(struct rbllama_job *job, const char *fallback) {
    const char *msg = error_last();
    snprintf(job->err, sizeof job->err, "%s", msg && msg[0] ? msg : fallback);
}

static void *job_trampoline(void *arg) {
    struct rbllama_job *job = arg;
    error_clear();
    job->ok = false;
    job->err[0] = '\0';
    job->run(job);
    return NULL;
}

/* The unblocking function: only an atomic store, safe inside a signal handler. */
static void job_unblock(void *arg) {
    atomic_store((atomic_bool *)arg, true);
}

struct job_frame {
    struct rbllama_job *job;
    bool *busy;
    int *running;
};

static VALUE job_loop(VALUE arg) {
    struct job_frame *f = (struct job_frame *)arg;
    struct rbllama_job *job = f->job;
    for (;;) {
        if (job->cancel) {
            atomic_store(job->cancel, false);
            rb_nogvl(job_trampoline, job, job_unblock, job->cancel, RB_NOGVL_UBF_ASYNC_SAFE);
        } else {
            /* no way to stop it midway: interrupts wait until it returns */
            rb_nogvl(job_trampoline, job, NULL, NULL, 0);
        }
        /* rb_nogvl has raised any pending interrupt by now */
        if (job->ok || !job->cancel || !atomic_load(job->cancel)) return Qnil;
    }
}

static VALUE job_leave(VALUE arg) {
    struct job_frame *f = (struct job_frame *)arg;
    if (f->busy) *f->busy = false;
    if (f->running) (*f->running)--;
    return Qnil;
}

void rbllama_job_run(struct rbllama_job *job, bool *busy, int *running) {
    struct job_frame frame = { job, busy, running };
    if (busy) *busy = true;
    if (running) (*running)++;
    rb_ensure(job_loop, (VALUE)&frame, job_leave, (VALUE)&frame);
}

/* ---- module functions ----------------------------------------------------------- */

static VALUE rb_llama_backend_init(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "numa" };
    VALUE kw[1];
    rbllama_scan_kwargs(argc, argv, names, 0, 1, kw);
    llama_backend_init(kw[0] != Qundef && RTEST(kw[0]));
    return Qnil;
}

static VALUE rb_llama_backend_free(VALUE self) {
    llama_backend_free();
    return Qnil;
}

struct quantize_job {
    struct rbllama_job job;
    char *input_path;
    char *output_path;
    llama_model_quantize_params params;
};

static void quantize_run(struct rbllama_job *job) {
    struct quantize_job *q = (struct quantize_job *)job;
    job->ok = llama_model_quantize(q->input_path, q->output_path, &q->params) == 0;
    if (!job->ok) rbllama_job_take_error(job, "");
}

static VALUE quantize_body(VALUE arg) {
    rbllama_job_run((struct rbllama_job *)arg, NULL, NULL);
    return Qnil;
}

static VALUE quantize_cleanup(VALUE arg) {
    struct quantize_job *q = (struct quantize_job *)arg;
    xfree(q->input_path);
    xfree(q->output_path);
    return Qnil;
}

static VALUE rb_llama_model_quantize(int argc, VALUE *argv, VALUE self) {
    static const char *const names[] = { "input_path", "output_path", "params" };
    VALUE kw[3];
    rbllama_scan_kwargs(argc, argv, names, 3, 0, kw);
    if (!RB_TYPE_P(kw[0], T_STRING)) rb_raise(rb_eArgError, "input_path must be a string");
    if (!RB_TYPE_P(kw[1], T_STRING)) rb_raise(rb_eArgError, "output_path must be a string");
    if (!rb_obj_is_kind_of(kw[2], rb_cLLaMAModelQuantizeParams)) {
        rb_raise(rb_eArgError, "params must be a ModelQuantizeParams");
    }
    struct quantize_job q = { .job = { .run = quantize_run } };
    q.params = *rbllama_model_quantize_params_get(kw[2]);
    /* StringValueCStr raises on a NUL byte: check both before copying either */
    const char *input_path = StringValueCStr(kw[0]), *output_path = StringValueCStr(kw[1]);
    q.input_path = ruby_strdup(input_path);
    q.output_path = ruby_strdup(output_path);
    rb_ensure(quantize_body, (VALUE)&q, quantize_cleanup, (VALUE)&q);
    if (!q.job.ok) rbllama_raise_library_error(rb_eRuntimeError, "Failed to quantize model", q.job.err);
    return Qnil;
}

static VALUE rb_llama_print_system_info(VALUE self) {
    return rb_utf8_str_new_cstr(llama_print_system_info());
}

static VALUE rb_llama_time_us(VALUE self) {
    return LL2NUM(llama_time_us());
}

static VALUE rb_llama_mmap_supported(VALUE self) {
    return llama_mmap_supported() ? Qtrue : Qfalse;
}

static VALUE rb_llama_mlock_supported(VALUE self) {
    return llama_mlock_supported() ? Qtrue : Qfalse;
}

static VALUE rb_llama_max_devices(VALUE self) {
    return INT2NUM(llama_max_devices());
}

/* ---- constants ----------------------------------------------------------------- */

static void define_hex_constant(const char *name, unsigned long value) {
    char buf[32];
    snprintf(buf, sizeof buf, "0x%lx", value);
    rb_define_const(rb_mLLaMACpp, name, rb_str_freeze(rb_utf8_str_new_cstr(buf)));
}

static void define_constants(void) {
#define INT_CONST(name) rb_define_const(rb_mLLaMACpp, #name, INT2NUM(name))
    INT_CONST(LLAMA_MAX_DEVICES);

    define_hex_constant("LLAMA_FILE_MAGIC_GGLA", LLAMA_FILE_MAGIC_GGLA);
    define_hex_constant("LLAMA_FILE_MAGIC_GGSN", LLAMA_FILE_MAGIC_GGSN);
    define_hex_constant("LLAMA_SESSION_MAGIC", LLAMA_SESSION_MAGIC);
    define_hex_constant("LLAMA_DEFAULT_SEED", LLAMA_DEFAULT_SEED);
    char buf[16];
    snprintf(buf, sizeof buf, "%d", LLAMA_SESSION_VERSION);
    rb_define_const(rb_mLLaMACpp, "LLAMA_SESSION_VERSION", rb_str_freeze(rb_utf8_str_new_cstr(buf)));

    INT_CONST(LLAMA_VOCAB_TYPE_SPM);
    INT_CONST(LLAMA_VOCAB_TYPE_BPE);

    INT_CONST(LLAMA_TOKEN_TYPE_UNDEFINED);
    INT_CONST(LLAMA_TOKEN_TYPE_NORMAL);
    INT_CONST(LLAMA_TOKEN_TYPE_UNKNOWN);
    INT_CONST(LLAMA_TOKEN_TYPE_CONTROL);
    INT_CONST(LLAMA_TOKEN_TYPE_USER_DEFINED);
    INT_CONST(LLAMA_TOKEN_TYPE_UNUSED);
    INT_CONST(LLAMA_TOKEN_TYPE_BYTE);

    INT_CONST(LLAMA_FTYPE_ALL_F32);
    INT_CONST(LLAMA_FTYPE_MOSTLY_F16);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q4_0);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q4_1);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q4_1_SOME_F16);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q8_0);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q5_0);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q5_1);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q2_K);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q3_K_S);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q3_K_M);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q3_K_L);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q4_K_S);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q4_K_M);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q5_K_S);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q5_K_M);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q6_K);
    INT_CONST(LLAMA_FTYPE_MOSTLY_IQ2_XXS);
    INT_CONST(LLAMA_FTYPE_MOSTLY_IQ2_XS);
    INT_CONST(LLAMA_FTYPE_MOSTLY_Q2_K_S);
    INT_CONST(LLAMA_FTYPE_GUESSED);

    INT_CONST(LLAMA_KV_OVERRIDE_INT);
    INT_CONST(LLAMA_KV_OVERRIDE_FLOAT);
    INT_CONST(LLAMA_KV_OVERRIDE_BOOL);

    INT_CONST(LLAMA_GRETYPE_END);
    INT_CONST(LLAMA_GRETYPE_ALT);
    INT_CONST(LLAMA_GRETYPE_RULE_REF);
    INT_CONST(LLAMA_GRETYPE_CHAR);
    INT_CONST(LLAMA_GRETYPE_CHAR_NOT);
    INT_CONST(LLAMA_GRETYPE_CHAR_RNG_UPPER);
    INT_CONST(LLAMA_GRETYPE_CHAR_ALT);

    INT_CONST(LLAMA_ROPE_SCALING_UNSPECIFIED);
    INT_CONST(LLAMA_ROPE_SCALING_NONE);
    INT_CONST(LLAMA_ROPE_SCALING_LINEAR);
    INT_CONST(LLAMA_ROPE_SCALING_YARN);
    INT_CONST(LLAMA_ROPE_SCALING_MAX_VALUE);

    INT_CONST(LLAMA_SPLIT_NONE);
    INT_CONST(LLAMA_SPLIT_LAYER);
    INT_CONST(LLAMA_SPLIT_ROW);
#undef INT_CONST
}

RUBY_FUNC_EXPORTED void Init_llama_cpp(void) {
    rb_mLLaMACpp = rb_define_module("LLaMACpp");

    rbllama_init_params();
    rbllama_init_model();
    rbllama_init_context();
    rbllama_init_batch();
    rbllama_init_sampling();
    rbllama_init_grammar();

    rb_define_module_function(rb_mLLaMACpp, "backend_init", rb_llama_backend_init, -1);
    rb_define_module_function(rb_mLLaMACpp, "backend_free", rb_llama_backend_free, 0);
    rb_define_module_function(rb_mLLaMACpp, "model_quantize", rb_llama_model_quantize, -1);
    rb_define_module_function(rb_mLLaMACpp, "print_system_info", rb_llama_print_system_info, 0);
    rb_define_module_function(rb_mLLaMACpp, "time_us", rb_llama_time_us, 0);
    rb_define_module_function(rb_mLLaMACpp, "mmap_supported?", rb_llama_mmap_supported, 0);
    rb_define_module_function(rb_mLLaMACpp, "mlock_supported?", rb_llama_mlock_supported, 0);
    rb_define_module_function(rb_mLLaMACpp, "max_devices", rb_llama_max_devices, 0);

    define_constants();
}
