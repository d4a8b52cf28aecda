/* Importance matrices in b1892's binary file format (see quantize.h). */
#include "quantize.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/checked.h"
#include "core/file_map.h"
#include "core/log.h"

/* Marks objects made here, since llama_model_quantize_params.imatrix is a void *. */
#define IMATRIX_MAGIC 0x78697471u /* "qtix" */

struct imatrix_entry {
    char *name;
    float *values;
    int64_t n;
};

struct quantize_imatrix {
    uint32_t magic;
    struct imatrix_entry *entries;
    size_t n, cap;
};

void quantize_imatrix_free(struct quantize_imatrix *im) {
    if (!im) return;
    for (size_t i = 0; i < im->n; i++) {
        free(im->entries[i].name);
        free(im->entries[i].values);
    }
    free(im->entries);
    im->magic = 0;
    free(im);
}

struct cursor {
    const uint8_t *p;
    size_t left;
};

static bool read_i32(struct cursor *c, int32_t *v) {
    if (c->left < sizeof *v) return false;
    memcpy(v, c->p, sizeof *v);
    c->p += sizeof *v;
    c->left -= sizeof *v;
    return true;
}

/* Adds an entry, or replaces the values of one with the same name (b1892
 * keeps the last); takes ownership of name and values (freed on failure). */
static bool imatrix_push(struct quantize_imatrix *im, char *name, float *values, int64_t n) {
    for (size_t i = 0; i < im->n; i++) {
        if (strcmp(im->entries[i].name, name) == 0) {
            free(name);
            free(im->entries[i].values);
            im->entries[i].values = values;
            im->entries[i].n = n;
            return true;
        }
    }
    if (im->n == im->cap) {
        size_t cap = im->cap ? im->cap * 2 : 64;
        struct imatrix_entry *e = realloc(im->entries, cap * sizeof *e);
        if (!e) {
            free(name);
            free(values);
            return false;
        }
        im->entries = e;
        im->cap = cap;
    }
    im->entries[im->n++] = (struct imatrix_entry){ .name = name, .values = values, .n = n };
    return true;
}

static bool imatrix_parse(struct quantize_imatrix *im, struct cursor *c, const char *path) {
    int32_t n_entries;
    if (!read_i32(c, &n_entries) || n_entries < 1) {
        error_set("importance matrix '%s': no entries", path);
        return false;
    }
    for (int32_t i = 0; i < n_entries; i++) {
        int32_t len, ncall, nval;
        if (!read_i32(c, &len) || len < 1 || (size_t)len > c->left) {
            error_set("importance matrix '%s': entry %d: bad name length", path, (int)i);
            return false;
        }
        if (memchr(c->p, '\0', (size_t)len)) {
            error_set("importance matrix '%s': entry %d: NUL byte in the name", path, (int)i);
            return false;
        }
        char *name = malloc((size_t)len + 1);
        if (!name) {
            error_set("importance matrix '%s': out of memory", path);
            return false;
        }
        memcpy(name, c->p, (size_t)len);
        name[len] = '\0';
        c->p += len;
        c->left -= (size_t)len;
        size_t bytes;
        if (!read_i32(c, &ncall) || !read_i32(c, &nval) || nval < 1 ||
            !ck_mul_size((size_t)nval, sizeof(float), &bytes) || bytes > c->left) {
            error_set("importance matrix '%s': entry '%s': bad value count", path, name);
            free(name);
            return false;
        }
        float *values = malloc(bytes);
        if (!values) {
            error_set("importance matrix '%s': out of memory", path);
            free(name);
            return false;
        }
        memcpy(values, c->p, bytes);
        c->p += bytes;
        c->left -= bytes;
        if (ncall > 0) {
            for (int32_t j = 0; j < nval; j++) values[j] /= (float)ncall;
        }
        if (!imatrix_push(im, name, values, nval)) {
            error_set("importance matrix '%s': out of memory", path);
            return false;
        }
    }
    return true;
}

struct quantize_imatrix *quantize_imatrix_load(const char *path) {
    struct file_map fm;
    if (!file_map_open(&fm, path, false)) return NULL;
    struct quantize_imatrix *im = calloc(1, sizeof *im);
    if (!im) {
        error_set("importance matrix '%s': out of memory", path);
        file_map_close(&fm);
        return NULL;
    }
    im->magic = IMATRIX_MAGIC;
    struct cursor c = { .p = fm.data, .left = fm.size };
    const bool ok = imatrix_parse(im, &c, path);
    file_map_close(&fm);
    if (!ok) {
        quantize_imatrix_free(im);
        return NULL;
    }
    return im;
}

bool quantize_imatrix_is_valid(const void *p) {
    return p && ((const struct quantize_imatrix *)p)->magic == IMATRIX_MAGIC;
}

size_t quantize_imatrix_count(const struct quantize_imatrix *im) {
    return im->n;
}

const float *quantize_imatrix_find(const struct quantize_imatrix *im, const char *name, int64_t *n_values) {
    for (size_t i = 0; i < im->n; i++) {
        if (strcmp(im->entries[i].name, name) == 0) {
            if (n_values) *n_values = im->entries[i].n;
            return im->entries[i].values;
        }
    }
    return NULL;
}

static void imatrix_remove(struct quantize_imatrix *im, size_t i) {
    free(im->entries[i].name);
    free(im->entries[i].values);
    memmove(&im->entries[i], &im->entries[i + 1], (im->n - i - 1) * sizeof *im->entries);
    im->n--;
}

void quantize_imatrix_exclude(struct quantize_imatrix *im, const char *part) {
    for (size_t i = im->n; i-- > 0;) {
        if (strstr(im->entries[i].name, part)) imatrix_remove(im, i);
    }
}

void quantize_imatrix_keep_only(struct quantize_imatrix *im, const char *const *parts, size_t n_parts) {
    for (size_t i = im->n; i-- > 0;) {
        bool keep = false;
        for (size_t j = 0; j < n_parts && !keep; j++) keep = strstr(im->entries[i].name, parts[j]) != NULL;
        if (!keep) imatrix_remove(im, i);
    }
}

static bool imatrix_record_valid(const struct quantize_imatrix_record *r) {
    return r->name && r->name[0] && strlen(r->name) <= INT32_MAX && r->n_values >= 1 && r->sums;
}

bool quantize_imatrix_write(const char *path, const struct quantize_imatrix_record *records, size_t n) {
    if (n < 1 || n > INT32_MAX) {
        error_set("importance matrix '%s': %zu entries (1 to %d can be written)", path, n, INT32_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (!imatrix_record_valid(&records[i])) {
            error_set("importance matrix '%s': entry %zu has no name or no values", path, i);
            return false;
        }
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        error_set("cannot create importance matrix '%s': %s", path, strerror(errno));
        return false;
    }
    /* the layout is described in quantize.h; little-endian like every supported host */
    const int32_t n_entries = (int32_t)n;
    bool ok = fwrite(&n_entries, sizeof n_entries, 1, f) == 1;
    for (size_t i = 0; ok && i < n; i++) {
        const struct quantize_imatrix_record *r = &records[i];
        const int32_t len = (int32_t)strlen(r->name);
        ok = fwrite(&len, sizeof len, 1, f) == 1 && fwrite(r->name, 1, (size_t)len, f) == (size_t)len &&
             fwrite(&r->ncall, sizeof r->ncall, 1, f) == 1 && fwrite(&r->n_values, sizeof r->n_values, 1, f) == 1 &&
             fwrite(r->sums, sizeof *r->sums, (size_t)r->n_values, f) == (size_t)r->n_values;
    }
    if (fclose(f) != 0) ok = false;
    if (!ok) {
        error_set("cannot write importance matrix '%s'", path);
        /* no partial file left behind (but never remove what is not a plain file, e.g. /dev/full) */
        struct stat st;
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) remove(path);
    }
    return ok;
}
