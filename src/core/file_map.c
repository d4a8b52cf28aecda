#define _GNU_SOURCE
#include "file_map.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"

static bool read_all(int fd, void *buf, size_t size) {
    char *p = buf;
    while (size > 0) {
        ssize_t n = read(fd, p, size);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        p += n;
        size -= (size_t)n;
    }
    return true;
}

bool file_map_open(struct file_map *fm, const char *path, bool use_mmap) {
    memset(fm, 0, sizeof *fm);
    if (!path) {
        error_set("no file name given");
        return false;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        error_set("cannot open '%s': %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        error_set("'%s' is not a regular file", path);
        close(fd);
        return false;
    }
    size_t size = (size_t)st.st_size;
    bool ok = true;
    if (size == 0) {
        /* nothing to map; callers see an empty buffer */
    } else if (use_mmap) {
        void *addr = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
        if (addr == MAP_FAILED) {
            error_set("cannot map '%s': %s", path, strerror(errno));
            ok = false;
        } else {
            fm->data = addr;
            fm->mapped = true;
        }
    } else {
        void *buf = malloc(size);
        if (!buf) {
            error_set("out of memory reading '%s' (%zu bytes)", path, size);
            ok = false;
        } else if (!read_all(fd, buf, size)) {
            error_set("cannot read '%s': %s", path, strerror(errno));
            free(buf);
            ok = false;
        } else {
            fm->data = buf;
        }
    }
    close(fd);
    if (ok) fm->size = size;
    return ok;
}

bool file_map_lock(struct file_map *fm) {
    return fm->data && file_map_lock_range(fm, fm->data, fm->size);
}

bool file_map_lock_range(struct file_map *fm, const void *p, size_t n) {
    if (!fm->data) return false;
    if (n == 0) return true;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t begin = (uintptr_t)p & ~(page - 1), end = ((uintptr_t)p + n + page - 1) & ~(page - 1);
    if (mlock((void *)begin, end - begin) != 0) {
        LOG_WARN("warning: cannot lock %zu bytes in memory (%s); continuing without mlock\n",
                 (size_t)(end - begin), strerror(errno));
        return false;
    }
    fm->locked = true;
    return true;
}

void file_map_close(struct file_map *fm) {
    if (fm->data) {
        if (fm->locked) munlock(fm->data, fm->size);
        if (fm->mapped) {
            munmap((void *)fm->data, fm->size);
        } else {
            free((void *)fm->data);
        }
    }
    memset(fm, 0, sizeof *fm);
}

bool file_map_release_pages(const struct file_map *fm, const void *p, size_t n) {
    if (!fm->mapped || fm->locked || n == 0) return false;
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t begin = ((uintptr_t)p + page - 1) & ~(page - 1), end = ((uintptr_t)p + n) & ~(page - 1);
    if (end <= begin) return false;
    return madvise((void *)begin, end - begin, MADV_DONTNEED) == 0;
}

bool file_map_mmap_supported(void) { return true; }
bool file_map_mlock_supported(void) { return true; }
