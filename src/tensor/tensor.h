/*
 * Tensors and the operations that build compute graphs.
 *
 * A tensor is metadata (element type, shape, strides, the op that produces
 * it and its sources) plus a data pointer. Building a graph only records ops;
 * nothing is computed until a backend runs the graph (backend/). Memory for
 * tensor data comes from a backend buffer (placed by the graph allocator or
 * by a loader), or, for small test graphs, from the tensor context itself.
 *
 * Shapes follow ggml's convention: ne[0] is the innermost (contiguous) dimension,
 * a "row" is ne[0] elements, nb[i] is the stride of dimension i in bytes.
 * For quantized types nb[0] is the block size in bytes and rows are whole blocks.
 *
 *     weight W  ne = [n_in, n_out]     activations X  ne = [n_in, n_tokens]
 *     op_mul_mat(ctx, W, X)  ->  ne = [n_out, n_tokens]   (each = dot(W row, X column))
 *
 * Ops broadcast their second operand where ggml does (add/mul/div: b repeats
 * over a's shape when each a.ne[i] is a multiple of b.ne[i]).
 */
#ifndef LLAMAC_TENSOR_TENSOR_H
#define LLAMAC_TENSOR_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ggml.h"

#define TENSOR_MAX_DIMS 4
#define TENSOR_MAX_SRC 10     /* mul_mat_id: ids, b and up to 8 experts (as b1892) */
#define TENSOR_MAX_OP_PARAMS 16 /* int32 slots */
#define TENSOR_MAX_NAME 64
#define TENSOR_DATA_ALIGN 64  /* alignment of tensor data in a context's arena */

enum tensor_op {
    OP_NONE = 0,     /* a leaf: weights, inputs */

    OP_DUP,          /* copy into a new contiguous tensor of the same type */
    OP_ADD,
    OP_ADD1,         /* a + scalar tensor b */
    OP_ACC,          /* a with b added into a view of it (training) */
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_SQR,
    OP_SQRT,
    OP_LOG,
    OP_SUM,          /* all elements -> 1 */
    OP_SUM_ROWS,     /* each row -> 1 */
    OP_MEAN,         /* each row -> its mean */
    OP_REPEAT,       /* tile a to b's shape */
    OP_REPEAT_BACK,
    OP_CONCAT,       /* along dim 2 (as b1892) */
    OP_NORM,         /* layer norm without affine: (x - mean) / sqrt(var + eps) */
    OP_RMS_NORM,     /* x / sqrt(mean(x^2) + eps) */
    OP_RMS_NORM_BACK,
    OP_MUL_MAT,
    OP_MUL_MAT_ID,   /* mixture of experts: per row, the expert picked by ids */
    OP_OUT_PROD,
    OP_SCALE,
    OP_SET,
    OP_CPY,          /* copy a into b (with type conversion) and return b's view */
    OP_CONT,         /* make a contiguous copy */
    OP_RESHAPE,
    OP_VIEW,
    OP_PERMUTE,
    OP_TRANSPOSE,
    OP_GET_ROWS,     /* rows of a picked by the I32 indices in b (-> F32) */
    OP_GET_ROWS_BACK,
    OP_DIAG,
    OP_DIAG_MASK_INF,  /* entries above the diagonal + n_past -> -inf */
    OP_DIAG_MASK_ZERO,
    OP_SOFT_MAX,       /* softmax(a * scale + mask) over rows */
    OP_SOFT_MAX_BACK,
    OP_ROPE,
    OP_ROPE_BACK,
    OP_ALIBI,
    OP_CLAMP,
    OP_ARGSORT,        /* I32 indices that sort each row */
    OP_PAD,
    OP_UNARY,          /* op_params[0] = enum tensor_unary_op */
    OP_SILU_BACK,
    OP_CROSS_ENTROPY_LOSS,
    OP_CROSS_ENTROPY_LOSS_BACK,
    OP_ATTENTION,      /* V x soft_max(K x Q masked, mask, scale) in one node (op_attention) */

    OP_COUNT
};

enum tensor_unary_op {
    UNARY_ABS, UNARY_SGN, UNARY_NEG, UNARY_STEP, UNARY_TANH, UNARY_ELU,
    UNARY_RELU, UNARY_GELU, UNARY_GELU_QUICK, UNARY_SILU,
    UNARY_COUNT
};

enum tensor_sort_order { SORT_ASC = 0, SORT_DESC = 1 };

/* RoPE modes (op_params): bit 1 = NeoX style (rotate halves instead of pairs). */
enum { ROPE_MODE_NORMAL = 0, ROPE_MODE_NEOX = 2 };

enum tensor_flags {
    TENSOR_FLAG_INPUT  = 1, /* set by the caller before compute */
    TENSOR_FLAG_OUTPUT = 2, /* read after compute: the allocator must not reuse it */
    TENSOR_FLAG_PARAM  = 4, /* trainable parameter */
};

struct backend_buffer;

struct tensor {
    enum ggml_type type;
    int64_t ne[TENSOR_MAX_DIMS]; /* elements per dimension */
    size_t nb[TENSOR_MAX_DIMS];  /* stride in bytes per dimension */

    enum tensor_op op;
    int32_t op_params[TENSOR_MAX_OP_PARAMS]; /* op-specific, floats stored bit-cast */
    struct tensor *src[TENSOR_MAX_SRC];

    struct tensor *view_src; /* the tensor whose memory this view uses, or NULL */
    size_t view_offs;        /* byte offset into view_src's data */

    void *data;                    /* NULL until placed in memory */
    struct backend_buffer *buffer; /* the buffer data lives in (NULL: context memory or external) */
    void *extra;                   /* backend-private data (e.g. a repacked copy of a weight) */
    uint32_t flags;                /* enum tensor_flags */

    struct tensor *grad;           /* gradient (training), or NULL */

    char name[TENSOR_MAX_NAME];
};

/* ---- tensor contexts: where tensor structs (and optionally data) live -------- */

struct tensor_ctx;

/* A context for up to max_tensors tensors. data_size > 0: tensors created in
 * it get their data from an internal arena of that many bytes (aligned);
 * data_size == 0: tensors are created without data (data == NULL), to be
 * placed by an allocator or a loader. NULL on allocation failure. */
struct tensor_ctx *tensor_ctx_new(size_t max_tensors, size_t data_size);
void tensor_ctx_free(struct tensor_ctx *ctx);
/* Forgets every tensor (and graph) of the context but keeps its memory, so a
 * graph rebuilt in it allocates nothing: the tensors, the data arena and the
 * graphs' blocks are reused. Pointers to the old tensors become invalid. */
void tensor_ctx_reset(struct tensor_ctx *ctx);
/* Bytes of data arena a set of tensors would need (for sizing data_size). */
size_t tensor_ctx_data_overhead(size_t n_tensors);
/* The tensors of a context, in creation order. */
struct tensor *tensor_ctx_first(struct tensor_ctx *ctx);
struct tensor *tensor_ctx_next(struct tensor_ctx *ctx, struct tensor *t);
size_t tensor_ctx_count(const struct tensor_ctx *ctx);

/* ---- creation and properties -------------------------------------------------- */

struct tensor *tensor_new(struct tensor_ctx *ctx, enum ggml_type type, int n_dims, const int64_t *ne);
struct tensor *tensor_new_1d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0);
struct tensor *tensor_new_2d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0, int64_t ne1);
struct tensor *tensor_new_3d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2);
struct tensor *tensor_new_4d(struct tensor_ctx *ctx, enum ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);

struct tensor *tensor_set_name(struct tensor *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

int64_t tensor_nelements(const struct tensor *t);
int64_t tensor_nrows(const struct tensor *t);      /* ne1 * ne2 * ne3 */
size_t tensor_nbytes(const struct tensor *t);      /* bytes spanned by the tensor's data */
size_t tensor_row_size(const struct tensor *t);    /* bytes of one contiguous row */
size_t tensor_element_size(const struct tensor *t);/* bytes per block / block size, as ggml_element_size */
int tensor_n_dims(const struct tensor *t);         /* highest dimension > 1, at least 1 */
bool tensor_is_contiguous(const struct tensor *t);
bool tensor_is_transposed(const struct tensor *t); /* nb[0] > nb[1] */
bool tensor_is_permuted(const struct tensor *t);
bool tensor_same_shape(const struct tensor *a, const struct tensor *b);
bool tensor_can_repeat(const struct tensor *small, const struct tensor *big); /* big.ne[i] % small.ne[i] == 0 */

/* Element access for F32/F16/I32 tensors with data (tests, small inputs). */
float tensor_get_f32_1d(const struct tensor *t, int64_t i);
void tensor_set_f32_1d(struct tensor *t, int64_t i, float v);

/* op_params helpers */
static inline float tensor_op_param_f32(const struct tensor *t, int i) {
    float f; __builtin_memcpy(&f, &t->op_params[i], sizeof f); return f;
}

/* ---- views (share the source's memory; no compute) ------------------------- */

struct tensor *tensor_view_1d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, size_t offset);
struct tensor *tensor_view_2d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
struct tensor *tensor_view_3d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2,
                              size_t nb1, size_t nb2, size_t offset);
struct tensor *tensor_view_4d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                              size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* Reshapes need a contiguous source. */
struct tensor *tensor_reshape_1d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0);
struct tensor *tensor_reshape_2d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1);
struct tensor *tensor_reshape_3d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2);
struct tensor *tensor_reshape_4d(struct tensor_ctx *ctx, struct tensor *a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
/* Dimension i of a becomes dimension axis_i of the result (as ggml_permute). */
struct tensor *tensor_permute(struct tensor_ctx *ctx, struct tensor *a, int axis0, int axis1, int axis2, int axis3);
struct tensor *tensor_transpose(struct tensor_ctx *ctx, struct tensor *a);

/* ---- ops (record a node; computed by a backend) ------------------------------ */

struct tensor *op_dup(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_add(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_add1(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_acc(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
struct tensor *op_sub(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_mul(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_div(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_sqr(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_sqrt(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_log(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_sum(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_sum_rows(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_mean(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_repeat(struct tensor_ctx *ctx, struct tensor *a, struct tensor *shape_of);
struct tensor *op_repeat_back(struct tensor_ctx *ctx, struct tensor *a, struct tensor *shape_of);
struct tensor *op_concat(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_norm(struct tensor_ctx *ctx, struct tensor *a, float eps);
struct tensor *op_rms_norm(struct tensor_ctx *ctx, struct tensor *a, float eps);
struct tensor *op_rms_norm_back(struct tensor_ctx *ctx, struct tensor *a, struct tensor *grad, float eps);
/* W [k, n] x X [k, m, b2, b3] -> [n, m, b2, b3]; W broadcasts over b2/b3 when X has more. */
struct tensor *op_mul_mat(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
/* op_mul_mat whose result goes through a -inf mask M [n, m] (F32) before
 * anything else reads it (attention scores before soft_max): an entry whose
 * mask is -inf may be left 0 instead of computed, since adding the mask
 * makes it -inf either way. The CPU kernels skip such blocks (causal
 * attention's upper triangle); every other entry is op_mul_mat's. */
struct tensor *op_mul_mat_masked(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b, struct tensor *mask);
/* Attention as three nodes would compute it, in one (a backend keeps the
 * scores in its cache):
 *     op_cont(tensor_permute(op_mul_mat(v, op_soft_max(op_mul_mat_masked(k, q, mask), mask, scale)),
 *                            0, 2, 1, 3))
 * with k F16 [d_k, n_kv, h_kv], q F32 [d_k, n_tok, n_head] (rows packed, any
 * other strides), v F16 [n_kv, d_v, h_kv] (rows packed), mask F32 [n_kv,
 * n_tok] contiguous, h_kv dividing n_head (head h reads KV head h / (n_head
 * / h_kv)); the result is F32 [d_v, n_head, n_tok] (a token's heads side by
 * side, as the output projection takes them), the same bits. */
struct tensor *op_attention(struct tensor_ctx *ctx, struct tensor *k, struct tensor *q, struct tensor *v,
                            struct tensor *mask, float scale);
/* A mul_mat's op_params[0]: the order in which a backend may add the products.
 * MUL_MAT_ORDER_REFERENCE (0, what op_mul_mat sets) is b1892's, so results
 * match the reference bit for bit; MUL_MAT_ORDER_ANY allows faster kernels
 * whose sums differ by float rounding (training sets it on its products). */
enum { MUL_MAT_ORDER_REFERENCE = 0, MUL_MAT_ORDER_ANY = 1 };
/* Experts as[0..n_as) (same shape), ids I32 [n_ids, n_rows]: row r of b is
 * multiplied by as[ids[id, r]] (b1892's ggml_mul_mat_id). */
struct tensor *op_mul_mat_id(struct tensor_ctx *ctx, struct tensor *const *as, int n_as, struct tensor *ids, int id, struct tensor *b);
struct tensor *op_out_prod(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_scale(struct tensor_ctx *ctx, struct tensor *a, float s);
struct tensor *op_set(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b, size_t nb1, size_t nb2, size_t nb3, size_t offset);
/* Copies a into b (converting to b's type, e.g. F32 -> F16 or Q8_0 for a KV cache); the result is a view of b. */
struct tensor *op_cpy(struct tensor_ctx *ctx, struct tensor *a, struct tensor *b);
struct tensor *op_cont(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_get_rows(struct tensor_ctx *ctx, struct tensor *a, struct tensor *rows);
struct tensor *op_get_rows_back(struct tensor_ctx *ctx, struct tensor *grad, struct tensor *rows, struct tensor *shape_of);
/* a [n, 1, b2, b3] -> [n, n, b2, b3] with a on the diagonal */
struct tensor *op_diag(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_diag_mask_inf(struct tensor_ctx *ctx, struct tensor *a, int n_past);
struct tensor *op_diag_mask_zero(struct tensor_ctx *ctx, struct tensor *a, int n_past);
/* softmax over rows of a*scale + mask; a contiguous F32; mask (may be NULL) contiguous F32
 * [ne0, m] with a's row count a multiple of m: row r of a uses mask row r % m (b1892). */
struct tensor *op_soft_max(struct tensor_ctx *ctx, struct tensor *a, struct tensor *mask, float scale);
struct tensor *op_soft_max_back(struct tensor_ctx *ctx, struct tensor *grad, struct tensor *y);
/* RoPE on a [head_dim, n_head, n_tokens] with positions pos (I32 [n_tokens]), as b1892's ggml_rope_custom. */
struct tensor *op_rope(struct tensor_ctx *ctx, struct tensor *a, struct tensor *pos, int n_dims, int mode,
                       int n_ctx, int n_orig_ctx, float freq_base, float freq_scale, float ext_factor,
                       float attn_factor, float beta_fast, float beta_slow);
struct tensor *op_rope_back(struct tensor_ctx *ctx, struct tensor *grad, struct tensor *pos, int n_dims, int mode,
                            int n_ctx, int n_orig_ctx, float freq_base, float freq_scale, float ext_factor,
                            float attn_factor, float beta_fast, float beta_slow);
struct tensor *op_alibi(struct tensor_ctx *ctx, struct tensor *a, int n_past, int n_head, float bias_max);
struct tensor *op_clamp(struct tensor_ctx *ctx, struct tensor *a, float min, float max);
struct tensor *op_argsort(struct tensor_ctx *ctx, struct tensor *a, enum tensor_sort_order order);
/* Indices of the k largest entries of each row (argsort descending, first k). */
struct tensor *op_top_k(struct tensor_ctx *ctx, struct tensor *a, int k);
struct tensor *op_pad(struct tensor_ctx *ctx, struct tensor *a, int p0, int p1, int p2, int p3);
struct tensor *op_unary(struct tensor_ctx *ctx, struct tensor *a, enum tensor_unary_op uop);
struct tensor *op_silu(struct tensor_ctx *ctx, struct tensor *a);
struct tensor *op_silu_back(struct tensor_ctx *ctx, struct tensor *a, struct tensor *grad);
struct tensor *op_cross_entropy_loss(struct tensor_ctx *ctx, struct tensor *logits, struct tensor *targets);
struct tensor *op_cross_entropy_loss_back(struct tensor_ctx *ctx, struct tensor *logits, struct tensor *targets, struct tensor *grad);

const char *tensor_op_name(enum tensor_op op);

/* ---- graphs --------------------------------------------------------------------- */

struct graph {
    int n_nodes;            /* ops to compute, in dependency order (views included) */
    int n_leafs;            /* tensors without an op (inputs, weights) */
    int capacity;
    struct tensor **nodes;
    struct tensor **leafs;
    /* private: open-addressing set of the tensors already added */
    size_t visited_size;
    struct tensor **visited;
};

/* A graph with room for `capacity` nodes and leafs, allocated in ctx. */
struct graph *graph_new(struct tensor_ctx *ctx, int capacity);
/* Adds `out` and everything it depends on (each tensor once, sources first).
 * False if the graph's capacity is exceeded. */
bool graph_build_forward(struct graph *g, struct tensor *out);
void graph_reset(struct graph *g);
/* Nodes [i0, i1) of g as a graph of their own (no leafs, nothing can be added),
 * for computing a graph in parts; it shares g's node list. */
struct graph graph_view(struct graph *g, int i0, int i1);

#endif
