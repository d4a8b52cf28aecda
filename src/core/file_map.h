/*
 * Read-only view of a whole file: mapped when possible, otherwise read into
 * memory. Either way `data`/`size` describe the file's bytes.
 */
#ifndef LLAMAC_CORE_FILE_MAP_H
#define LLAMAC_CORE_FILE_MAP_H

#include <stdbool.h>
#include <stddef.h>

struct file_map {
    const void *data;   /* the file's bytes (NULL for an empty file) */
    size_t size;        /* file size in bytes */
    bool mapped;        /* true: mmap'ed; false: malloc'ed copy */
    bool locked;        /* mlock succeeded */
};

/* Opens `path`; use_mmap=false reads the file into memory instead.
 * Returns false with error_set() on failure (fm is then zeroed). */
bool file_map_open(struct file_map *fm, const char *path, bool use_mmap);
/* Pins the pages in RAM; logs a warning and returns false if not permitted. */
bool file_map_lock(struct file_map *fm);
/* The same for the whole pages overlapping [p, p + n) (inside the file's
 * bytes); file_map_close unlocks them. */
bool file_map_lock_range(struct file_map *fm, const void *p, size_t n);
void file_map_close(struct file_map *fm);
/* For a mapped file with no locked pages: drops the whole pages inside [p, p + n) from
 * this process's resident set (the page cache keeps them; a later read
 * maps them again). For data the process has copied elsewhere. True when
 * the pages were released. */
bool file_map_release_pages(const struct file_map *fm, const void *p, size_t n);

bool file_map_mmap_supported(void);
bool file_map_mlock_supported(void);

#endif
