/* context/kv_cells: b1892's KV cell bookkeeping (slot search, sequence ops, mask). */
#include "test_util.h"

#include <math.h>

#include "context/kv_cells.h"

/* A batch of n tokens of one sequence at positions p0.. */
struct seq_batch {
    llama_pos pos[64];
    int32_t n_seq[64];
    llama_seq_id ids[64];
    llama_seq_id *seq_ptr[64];
    struct kv_batch_view view;
};

static struct kv_batch_view *make_batch(struct seq_batch *b, uint32_t n, llama_pos p0, llama_seq_id seq) {
    for (uint32_t i = 0; i < n; i++) {
        b->pos[i] = p0 + (llama_pos)i;
        b->n_seq[i] = 1;
        b->ids[i] = seq;
        b->seq_ptr[i] = &b->ids[i];
    }
    b->view = (struct kv_batch_view){ n, b->pos, b->n_seq, b->seq_ptr };
    return &b->view;
}

/* decode as llama_decode does: heuristic head reset, find slot, commit */
static bool decode(struct kv_cells *kv, struct kv_batch_view *v) {
    if (kv->head > kv->used + 2 * v->n_tokens) kv->head = 0;
    if (!kv_cells_find_slot(kv, v)) return false;
    kv_cells_commit(kv, v->n_tokens);
    return true;
}

static void test_fill_and_full(void) {
    struct kv_cells kv;
    struct seq_batch b;
    CHECK(kv_cells_init(&kv, 16));
    CHECK(decode(&kv, make_batch(&b, 10, 0, 0)));
    CHECK_EQ_INT(kv.used, 10);
    CHECK_EQ_INT(kv.head, 10);
    CHECK(decode(&kv, make_batch(&b, 6, 10, 0)));
    CHECK_EQ_INT(kv.used, 16);
    CHECK_EQ_INT(kv.head, 0); /* wrapped */
    CHECK(!kv_cells_find_slot(&kv, make_batch(&b, 1, 16, 0))); /* full: no slot, nothing changed */
    CHECK_EQ_INT(kv.used, 16);
    CHECK(!kv_cells_find_slot(&kv, make_batch(&b, 17, 0, 1))); /* larger than the cache */
    CHECK_EQ_INT(kv_cells_token_count(&kv), 16);
    CHECK_EQ_INT(kv_cells_max_used(&kv), 16);
    kv_cells_clear(&kv);
    CHECK_EQ_INT(kv.used, 0);
    CHECK_EQ_INT(kv_cells_max_used(&kv), 0);
    kv_cells_free(&kv);
}

static void test_seq_ops(void) {
    struct kv_cells kv;
    struct seq_batch b;
    CHECK(kv_cells_init(&kv, 32));
    CHECK(decode(&kv, make_batch(&b, 8, 0, 0))); /* seq 0: cells 0..7, pos 0..7 */
    CHECK(decode(&kv, make_batch(&b, 4, 0, 1))); /* seq 1: cells 8..11, pos 0..3 */

    /* seq_cp: seq 2 shares seq 0's first 4 positions; head goes to 0 */
    kv_cells_seq_cp(&kv, 0, 2, 0, 4);
    CHECK_EQ_INT(kv.head, 0);
    CHECK(kv_cell_has_seq(&kv.cells[3], 2) && !kv_cell_has_seq(&kv.cells[4], 2));
    CHECK_EQ_INT(kv_cells_token_count(&kv), 16);
    CHECK_EQ_INT(kv.used, 12);

    /* seq_rm of one sequence keeps cells another sequence still uses */
    kv_cells_seq_rm(&kv, 0, 2, -1); /* seq 0 from pos 2 on */
    CHECK_EQ_INT(kv.used, 12 - 4);  /* cells 4..7 freed; 2, 3 still in seq 2 */
    CHECK(kv.cells[2].pos == 2 && kv_cell_has_seq(&kv.cells[2], 2) && !kv_cell_has_seq(&kv.cells[2], 0));
    CHECK(kv.cells[5].pos == -1);

    /* seq_rm with seq < 0 clears every sequence in the range */
    kv_cells_seq_rm(&kv, -1, 0, 1);
    CHECK(kv.cells[0].pos == -1 && kv.cells[8].pos == -1); /* pos 0 of seq 0/2 and of seq 1 */
    CHECK_EQ_INT(kv.used, 6);
    CHECK_EQ_INT(kv.head, 0);

    /* seq_shift: seq 1 (cells 9..11, pos 1..3) moves by -2; pos 1 falls below 0 and is freed */
    kv_cells_seq_shift(&kv, 1, 0, -1, -2);
    CHECK(kv.has_shift);
    CHECK_EQ_INT(kv.cells[9].pos, -1);
    CHECK_EQ_INT(kv.cells[10].pos, 0);
    CHECK_EQ_INT(kv.cells[10].delta, -2);
    CHECK_EQ_INT(kv.head, 9); /* first freed cell */
    CHECK_EQ_INT(kv.used, 5);
    kv_cells_shift_applied(&kv);
    CHECK(!kv.has_shift && kv.cells[10].delta == 0);

    /* seq_div: positions of seq 1 halved, delta records the move */
    kv_cells_seq_div(&kv, 1, 0, -1, 2);
    CHECK_EQ_INT(kv.cells[11].pos, 0); /* was 1 */
    CHECK_EQ_INT(kv.cells[11].delta, -1);

    /* seq_keep: only seq 2 survives, and only as seq 2 */
    kv_cells_seq_keep(&kv, 2);
    CHECK_EQ_INT(kv.used, 3); /* cells 1, 2, 3 */
    CHECK(kv_cell_seq_count(&kv.cells[1]) == 1 && kv_cell_has_seq(&kv.cells[1], 2));
    CHECK_EQ_INT(kv.head, 0);
    kv_cells_free(&kv);
}

static void test_mask(void) {
    struct kv_cells kv;
    struct seq_batch a, b;
    CHECK(kv_cells_init(&kv, 8));
    CHECK(decode(&kv, make_batch(&a, 3, 0, 0)));
    CHECK(decode(&kv, make_batch(&a, 2, 0, 1)));
    struct kv_batch_view *v = make_batch(&b, 2, 3, 0); /* seq 0, pos 3, 4 */
    CHECK(kv_cells_find_slot(&kv, v));                   /* cells 5, 6 */
    float mask[2 * 8];
    kv_cells_build_mask(&kv, v, 8, mask);
    /* token at pos 3 sees cells 0..2 (seq 0) and itself (cell 5), not seq 1 or pos 4 */
    const float expect0[8] = { 0, 0, 0, -INFINITY, -INFINITY, 0, -INFINITY, -INFINITY };
    const float expect1[8] = { 0, 0, 0, -INFINITY, -INFINITY, 0, 0, -INFINITY };
    CHECK(memcmp(mask, expect0, sizeof expect0) == 0);
    CHECK(memcmp(mask + 8, expect1, sizeof expect1) == 0);
    kv_cells_free(&kv);
}

int main(void) {
    test_fill_and_full();
    test_seq_ops();
    test_mask();
    return test_finish("test_kv_cells");
}
