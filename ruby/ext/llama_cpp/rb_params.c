/*
 * Parameter objects: ModelParams, ContextParams, ModelQuantizeParams and
 * ModelKVOverride, each wrapping the llama.h struct with its defaults.
 * Plain setters coerce like 0.12.2 (no type check) and return the stored value.
 */
#include "rb_llama_cpp.h"

VALUE rb_cLLaMAModelParams;
VALUE rb_cLLaMAContextParams;
VALUE rb_cLLaMAModelQuantizeParams;
VALUE rb_cLLaMAModelKVOverride;

RBLLAMA_STRUCT_CLASS(model_params, struct llama_model_params, "LLaMACpp::ModelParams")
RBLLAMA_STRUCT_CLASS(context_params, struct llama_context_params, "LLaMACpp::ContextParams")
RBLLAMA_STRUCT_CLASS(quantize_params, llama_model_quantize_params, "LLaMACpp::ModelQuantizeParams")
/* zero-filled: key "", tag 0, values 0 */
RBLLAMA_STRUCT_CLASS(kv, struct llama_model_kv_override, "LLaMACpp::ModelKVOverride")

struct llama_model_params *rbllama_model_params_get(VALUE self) {
    return model_params_get(self);
}

struct llama_context_params *rbllama_context_params_get(VALUE self) {
    return context_params_get(self);
}

llama_model_quantize_params *rbllama_model_quantize_params_get(VALUE self) {
    return quantize_params_get(self);
}

/* New parameter objects hold llama.h's defaults. */
static VALUE model_params_alloc_default(VALUE klass) {
    VALUE obj = model_params_alloc(klass);
    *model_params_get(obj) = llama_model_default_params();
    return obj;
}

static VALUE context_params_alloc_default(VALUE klass) {
    VALUE obj = context_params_alloc(klass);
    *context_params_get(obj) = llama_context_default_params();
    return obj;
}

static VALUE quantize_params_alloc_default(VALUE klass) {
    VALUE obj = quantize_params_alloc(klass);
    *quantize_params_get(obj) = llama_model_quantize_default_params();
    return obj;
}

/* Unsigned fields: a negative value would wrap to a huge size. */
static uint32_t to_u32(VALUE v, const char *name) {
    long long x = NUM2LL(v);
    if (x < 0) rb_raise(rb_eArgError, "%s must be a non-negative integer", name);
    if (x > (long long)UINT32_MAX) rb_raise(rb_eRangeError, "integer %lld too big for %s", x, name);
    return (uint32_t)x;
}

/* U32_FIELD: like UINT_FIELD, but a negative value is an ArgumentError. */
#define U32_FIELD(prefix, getter, field)                                                    \
    static VALUE prefix##_get_##field(VALUE self) { return UINT2NUM(getter(self)->field); } \
    static VALUE prefix##_set_##field(VALUE self, VALUE v) {                                \
        getter(self)->field = to_u32(v, #field);                                            \
        return UINT2NUM(getter(self)->field);                                               \
    }

/* ---- ModelParams ---------------------------------------------------------------- */

#define MP rbllama_model_params_get
INT_FIELD(mp, MP, n_gpu_layers)
INT_FIELD(mp, MP, main_gpu)
BOOL_FIELD(mp, MP, vocab_only)
BOOL_FIELD(mp, MP, use_mmap)
BOOL_FIELD(mp, MP, use_mlock)
ENUM_FIELD(mp, MP, split_mode, enum llama_split_mode)

static VALUE mp_get_tensor_split(VALUE self) {
    const float *split = MP(self)->tensor_split;
    return split ? rbllama_floats_to_array(split, LLAMA_MAX_DEVICES) : rb_ary_new();
}
#undef MP

/* ---- ContextParams ------------------------------------------------------------------ */

#define CP rbllama_context_params_get
U32_FIELD(cp, CP, n_ctx)
U32_FIELD(cp, CP, n_batch)
U32_FIELD(cp, CP, n_threads)
U32_FIELD(cp, CP, n_threads_batch)
U32_FIELD(cp, CP, yarn_orig_ctx)
FLOAT_FIELD(cp, CP, rope_freq_base)
FLOAT_FIELD(cp, CP, rope_freq_scale)
FLOAT_FIELD(cp, CP, yarn_ext_factor)
FLOAT_FIELD(cp, CP, yarn_attn_factor)
FLOAT_FIELD(cp, CP, yarn_beta_fast)
FLOAT_FIELD(cp, CP, yarn_beta_slow)
BOOL_FIELD(cp, CP, mul_mat_q)
BOOL_FIELD(cp, CP, logits_all)
BOOL_FIELD(cp, CP, embedding)
BOOL_FIELD(cp, CP, offload_kqv)

/* Read back as int32 like 0.12.2 (the default 0xFFFFFFFF reads -1). */
static VALUE cp_get_seed(VALUE self) {
    return INT2NUM((int32_t)CP(self)->seed);
}

static VALUE cp_set_seed(VALUE self, VALUE v) {
    if (NUM2LL(v) < 0) rb_raise(rb_eArgError, "seed must be positive");
    CP(self)->seed = to_u32(v, "seed");
    return INT2NUM((int32_t)CP(self)->seed);
}

static VALUE cp_get_rope_scaling_type(VALUE self) {
    return INT2NUM(CP(self)->rope_scaling_type);
}

static VALUE cp_set_rope_scaling_type(VALUE self, VALUE v) {
    int x = NUM2INT(v);
    if (x < INT8_MIN || x > INT8_MAX) rb_raise(rb_eRangeError, "rope_scaling_type %d is out of range", x);
    CP(self)->rope_scaling_type = (int8_t)x;
    return INT2NUM(CP(self)->rope_scaling_type);
}

ENUM_FIELD(cp, CP, type_k, enum ggml_type)
ENUM_FIELD(cp, CP, type_v, enum ggml_type)
#undef CP

/* ---- ModelQuantizeParams ---------------------------------------------------------------- */

#define QP rbllama_model_quantize_params_get
BOOL_FIELD(qp, QP, allow_requantize)
BOOL_FIELD(qp, QP, quantize_output_tensor)
BOOL_FIELD(qp, QP, only_copy)
BOOL_FIELD(qp, QP, pure)
INT_FIELD(qp, QP, nthread)
ENUM_FIELD(qp, QP, ftype, enum llama_ftype)
#undef QP

/* ---- ModelKVOverride (readers only; nothing in the API consumes it) ---------------------- */

static VALUE kv_key(VALUE self) {
    const char *key = kv_get(self)->key;
    return rb_utf8_str_new(key, (long)strnlen(key, sizeof kv_get(self)->key));
}

static VALUE kv_tag(VALUE self) {
    return INT2NUM(kv_get(self)->tag);
}

static VALUE kv_int_value(VALUE self) {
    return LL2NUM(kv_get(self)->int_value);
}

static VALUE kv_float_value(VALUE self) {
    return DBL2NUM(kv_get(self)->float_value);
}

static VALUE kv_bool_value(VALUE self) {
    return kv_get(self)->bool_value ? Qtrue : Qfalse;
}

void rbllama_init_params(void) {
    VALUE k = rb_cLLaMAModelParams = rb_define_class_under(rb_mLLaMACpp, "ModelParams", rb_cObject);
    rb_define_alloc_func(k, model_params_alloc_default);
    DEFINE_ACCESSOR(k, mp, n_gpu_layers, "n_gpu_layers");
    DEFINE_ACCESSOR(k, mp, split_mode, "split_mode");
    DEFINE_ACCESSOR(k, mp, main_gpu, "main_gpu");
    rb_define_method(k, "tensor_split", mp_get_tensor_split, 0);
    DEFINE_ACCESSOR(k, mp, vocab_only, "vocab_only");
    DEFINE_ACCESSOR(k, mp, use_mmap, "use_mmap");
    DEFINE_ACCESSOR(k, mp, use_mlock, "use_mlock");

    k = rb_cLLaMAContextParams = rb_define_class_under(rb_mLLaMACpp, "ContextParams", rb_cObject);
    rb_define_alloc_func(k, context_params_alloc_default);
    DEFINE_ACCESSOR(k, cp, seed, "seed");
    DEFINE_ACCESSOR(k, cp, n_ctx, "n_ctx");
    DEFINE_ACCESSOR(k, cp, n_batch, "n_batch");
    DEFINE_ACCESSOR(k, cp, n_threads, "n_threads");
    DEFINE_ACCESSOR(k, cp, n_threads_batch, "n_threads_batch");
    DEFINE_ACCESSOR(k, cp, rope_scaling_type, "rope_scaling_type");
    DEFINE_ACCESSOR(k, cp, rope_freq_base, "rope_freq_base");
    DEFINE_ACCESSOR(k, cp, rope_freq_scale, "rope_freq_scale");
    DEFINE_ACCESSOR(k, cp, yarn_ext_factor, "yarn_ext_factor");
    DEFINE_ACCESSOR(k, cp, yarn_attn_factor, "yarn_attn_factor");
    DEFINE_ACCESSOR(k, cp, yarn_beta_fast, "yarn_beta_fast");
    DEFINE_ACCESSOR(k, cp, yarn_beta_slow, "yarn_beta_slow");
    DEFINE_ACCESSOR(k, cp, yarn_orig_ctx, "yarn_orig_ctx");
    DEFINE_ACCESSOR(k, cp, type_k, "type_k");
    DEFINE_ACCESSOR(k, cp, type_v, "type_v");
    DEFINE_ACCESSOR(k, cp, mul_mat_q, "mul_mat_q");
    DEFINE_ACCESSOR(k, cp, logits_all, "logits_all");
    DEFINE_ACCESSOR(k, cp, embedding, "embedding");
    DEFINE_ACCESSOR(k, cp, offload_kqv, "offload_kqv");

    k = rb_cLLaMAModelQuantizeParams = rb_define_class_under(rb_mLLaMACpp, "ModelQuantizeParams", rb_cObject);
    rb_define_alloc_func(k, quantize_params_alloc_default);
    DEFINE_ACCESSOR(k, qp, nthread, "n_thread");
    DEFINE_ACCESSOR(k, qp, ftype, "ftype");
    DEFINE_ACCESSOR(k, qp, allow_requantize, "allow_requantize");
    DEFINE_ACCESSOR(k, qp, quantize_output_tensor, "quantize_output_tensor");
    DEFINE_ACCESSOR(k, qp, only_copy, "only_copy");
    DEFINE_ACCESSOR(k, qp, pure, "pure");

    k = rb_cLLaMAModelKVOverride = rb_define_class_under(rb_mLLaMACpp, "ModelKVOverride", rb_cObject);
    rb_define_alloc_func(k, kv_alloc);
    rb_define_method(k, "key", kv_key, 0);
    rb_define_method(k, "tag", kv_tag, 0);
    rb_define_method(k, "int_value", kv_int_value, 0);
    rb_define_method(k, "float_value", kv_float_value, 0);
    rb_define_method(k, "bool_value", kv_bool_value, 0);
}
