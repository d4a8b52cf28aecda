/*
 * rb_llama_cpp.h — shared declarations of the LLaMACpp extension (the
 * llama_cpp.rb 0.12.2 API over llamac's llama.h).
 *
 * Files: rb_llama_cpp.c (module, constants, helpers, GVL-free jobs),
 * rb_params.c (ModelParams, ContextParams, ModelQuantizeParams,
 * ModelKVOverride), rb_model.c (Model), rb_context.c (Context, Timings),
 * rb_batch.c (Batch), rb_sampling.c (TokenData, TokenDataArray, Context#sample_*),
 * rb_grammar.c (GrammarElement, Grammar).
 *
 * Threading: every Ruby method runs with the GVL held except the bodies of
 * jobs (rbllama_job_run) and the model loader thread. Counters and flags in
 * the structs below are only touched with the GVL held.
 */
#ifndef RB_LLAMA_CPP_H
#define RB_LLAMA_CPP_H

#include <ruby.h>
#include <ruby/thread.h>
#include <ruby/util.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

/* Ruby's headers define DEPRECATED(x) too; llama.h needs its own two-argument one. */
#undef DEPRECATED
#include "llama.h"

extern VALUE rb_mLLaMACpp;
extern VALUE rb_cLLaMAModel;
extern VALUE rb_cLLaMAContext;
extern VALUE rb_cLLaMAModelParams;
extern VALUE rb_cLLaMAContextParams;
extern VALUE rb_cLLaMAModelQuantizeParams;
extern VALUE rb_cLLaMAModelKVOverride;
extern VALUE rb_cLLaMABatch;
extern VALUE rb_cLLaMATokenData;
extern VALUE rb_cLLaMATokenDataArray;
extern VALUE rb_cLLaMAGrammarElement;
extern VALUE rb_cLLaMAGrammar;
extern VALUE rb_cLLaMATimings;

void rbllama_init_params(void);
void rbllama_init_model(void);
void rbllama_init_context(void);
void rbllama_init_batch(void);
void rbllama_init_sampling(void);
void rbllama_init_grammar(void);

/* ---- argument helpers (rb_llama_cpp.c) ---------------------------------- */

/* Splits `argc/argv` into keyword values, Ruby's own messages for missing or
 * unknown keywords. names: required ones first; absent optional ones are Qundef. */
void rbllama_scan_kwargs(int argc, VALUE *argv, const char *const *names, int n_required, int n_optional,
                         VALUE *values);
/* The same for a keyword hash already split off (Qnil = none given). */
void rbllama_get_kwargs(VALUE kwargs, const char *const *names, int n_required, int n_optional, VALUE *values);

/* Raise ArgumentError(message) unless v is an Integer / a Float / true or false. */
void rbllama_expect_integer(VALUE v, const char *message);
void rbllama_expect_float(VALUE v, const char *message);
void rbllama_expect_boolean(VALUE v, const char *message);

/* A String's bytes as a NUL-terminated heap copy (xfree it); ArgumentError(message)
 * when v is not a String, ArgumentError when it contains a NUL byte. */
char *rbllama_path_dup(VALUE v, const char *message);

/* Array of Integers -> token ids (xmalloc'd, *n_out elements); TypeError/RangeError for bad items. */
llama_token *rbllama_tokens_from_array(VALUE array, long *n_out);
VALUE rbllama_tokens_to_array(const llama_token *tokens, long n);
VALUE rbllama_floats_to_array(const float *values, long n);

/* Raise RuntimeError "<what>: <the library's last error>" (or just <what>). */
NORETURN(void rbllama_raise_library_error(VALUE klass, const char *what, const char *library_message));

/* ---- classes over one plain struct ------------------------------------------ */

/* A class whose objects each own one C struct with nothing inside that points
 * to Ruby objects: defines NAME_type, NAME_alloc (zero-filled) and NAME_get
 * (TypeError for objects of other classes). */
#define RBLLAMA_STRUCT_CLASS(name, ctype, class_name)                                                        \
    static size_t name##_memsize(const void *p) { return sizeof(ctype); }                                   \
    static const rb_data_type_t name##_type = {                                                              \
        class_name, { NULL, RUBY_TYPED_DEFAULT_FREE, name##_memsize, }, NULL, NULL, RUBY_TYPED_FREE_IMMEDIATELY \
    };                                                                                                       \
    static VALUE name##_alloc(VALUE klass) {                                                                 \
        ctype *p;                                                                                            \
        return TypedData_Make_Struct(klass, ctype, &name##_type, p);                                         \
    }                                                                                                        \
    static ctype *name##_get(VALUE self) { return rb_check_typeddata(self, &name##_type); }

/* Accessors of a struct field: PREFIX_get_FIELD reads it, PREFIX_set_FIELD
 * coerces like 0.12.2 (no type check), stores and returns the stored value;
 * getter(self) gives the struct. DEFINE_ACCESSOR registers both as NAME and NAME=. */
#define INT_FIELD(prefix, getter, field)                                                   \
    static VALUE prefix##_get_##field(VALUE self) { return INT2NUM(getter(self)->field); } \
    static VALUE prefix##_set_##field(VALUE self, VALUE v) {                               \
        getter(self)->field = NUM2INT(v);                                                  \
        return INT2NUM(getter(self)->field);                                               \
    }
#define UINT_FIELD(prefix, getter, field)                                                   \
    static VALUE prefix##_get_##field(VALUE self) { return UINT2NUM(getter(self)->field); } \
    static VALUE prefix##_set_##field(VALUE self, VALUE v) {                                \
        getter(self)->field = NUM2UINT(v);                                                  \
        return UINT2NUM(getter(self)->field);                                               \
    }
#define ENUM_FIELD(prefix, getter, field, ctype)                                           \
    static VALUE prefix##_get_##field(VALUE self) { return INT2NUM(getter(self)->field); } \
    static VALUE prefix##_set_##field(VALUE self, VALUE v) {                               \
        getter(self)->field = (ctype)NUM2INT(v);                                           \
        return INT2NUM(getter(self)->field);                                               \
    }
#define FLOAT_FIELD(prefix, getter, field)                                                 \
    static VALUE prefix##_get_##field(VALUE self) { return DBL2NUM(getter(self)->field); } \
    static VALUE prefix##_set_##field(VALUE self, VALUE v) {                               \
        getter(self)->field = (float)NUM2DBL(v);                                           \
        return DBL2NUM(getter(self)->field);                                               \
    }
#define BOOL_FIELD(prefix, getter, field)                                                          \
    static VALUE prefix##_get_##field(VALUE self) { return getter(self)->field ? Qtrue : Qfalse; } \
    static VALUE prefix##_set_##field(VALUE self, VALUE v) {                                       \
        getter(self)->field = RTEST(v);                                                            \
        return getter(self)->field ? Qtrue : Qfalse;                                               \
    }
#define DEFINE_ACCESSOR(klass, prefix, field, name)         \
    rb_define_method(klass, name, prefix##_get_##field, 0); \
    rb_define_method(klass, name "=", prefix##_set_##field, 1)

/* ---- GVL-free jobs -------------------------------------------------------- */

/* Work that runs without the GVL. An interrupt (Ctrl-C, Thread#raise,
 * Thread#kill) sets *cancel, which the library polls (the abort callback of a
 * context); the interrupt is then raised as soon as the job returns. A job
 * that failed only because it was cancelled, where the interrupt raised
 * nothing (a signal trap that returns, Thread#wakeup), is run again. */
struct rbllama_job {
    void (*run)(struct rbllama_job *job); /* without the GVL: sets ok, and err on failure */
    atomic_bool *cancel;                  /* NULL: the work cannot be stopped midway */
    bool ok;
    char err[512];
};

/* Runs the job; *busy (when not NULL) is true while it runs, *running (when
 * not NULL) is incremented while it runs. May raise (interrupts). */
void rbllama_job_run(struct rbllama_job *job, bool *busy, int *running);

/* Copies the calling thread's last library error into job->err. */
void rbllama_job_take_error(struct rbllama_job *job, const char *fallback);

/* The C structs inside the parameter objects (TypeError for other objects). */
struct llama_model_params *rbllama_model_params_get(VALUE self);
struct llama_context_params *rbllama_context_params_get(VALUE self);
llama_model_quantize_params *rbllama_model_quantize_params_get(VALUE self);

/* ---- shared objects --------------------------------------------------------- */

/* A loaded llama_model shared by its Model object and every Context made from
 * it: freed when the last of them lets go, so freeing order never matters. */
struct rbllama_model_ref {
    struct llama_model *model;
    int refs;          /* the Model object while loaded, plus one per Context */
    int running;       /* decodes in flight on contexts of this model */
    bool lora_running; /* apply_lora_from_file in flight (weights change) */
    int32_t n_vocab;
    int32_t n_embd;
};

/* The loaded model of a Model object: TypeError for other objects,
 * RuntimeError `empty_message` when it holds no model. */
struct rbllama_model_ref *rbllama_model_ref(VALUE model, const char *empty_message);
void rbllama_model_ref_retain(struct rbllama_model_ref *ref);
void rbllama_model_ref_release(struct rbllama_model_ref *ref);

struct rbllama_context {
    struct llama_context *ctx;
    struct rbllama_model_ref *model_ref;
    VALUE model;          /* the Model object, kept alive (marked) */
    atomic_bool cancel;   /* polled by the abort callback while a decode runs */
    bool busy;            /* a job runs on this context in some thread */
    bool evaluated;       /* logits are available */
    bool logits_all;      /* ContextParams#logits_all at creation */
    bool embedding;       /* ContextParams#embedding at creation */
    int32_t n_tokens;     /* tokens of the last decode */
    int32_t logits_row;   /* row of llama_get_logits_ith that Context#logits returns (logits_all false) */
};

/* The struct of a Context object, initialised or not (TypeError for other objects). */
struct rbllama_context *rbllama_context_peek(VALUE self);

/* The context of a Context object, usable now: RuntimeError (or `klass`)
 * "LLaMA context is not initialized", RuntimeError when busy in another thread. */
struct rbllama_context *rbllama_context_get(VALUE self, VALUE klass);

/* TokenDataArray's storage; RuntimeError "TokenDataArray is empty" for an uninitialised one. */
llama_token_data_array *rbllama_token_data_array_get(VALUE self);

struct llama_grammar *rbllama_grammar_get(VALUE self);

/* A Batch ready for llama_decode (validated against its own buffers);
 * *in_use is counted up while a decode reads it (setters refuse then). */
struct llama_batch rbllama_batch_for_decode(VALUE batch, int **in_use);

#endif
