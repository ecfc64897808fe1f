/* core/mmap.c - read-only file mappings and small whole-file reads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "sqz/io.h"

sqz_status sqz_map(const char *path, sqz_mapping **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    SQZ_RETURN_IF(fd < 0, SQZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int e = errno;
        close(fd);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: not a regular file%s%s", path, e ? ": " : "", e ? strerror(e) : "");
    }
    sqz_mapping *m = sqz__calloc(1, sizeof *m);
    if (!m) { close(fd); return SQZ_ERR_NOMEM; }
    m->path = sqz__strdup(path);
    m->size = (size_t)st.st_size;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(m->path);
            free(m);
            return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot map %zu bytes: %s", path, (size_t)st.st_size, strerror(e));
        }
        m->data = p;
    }
    close(fd);
    if (!m->path) { sqz_unmap(m); return SQZ_ERR_NOMEM; }
    *out = m;
    return SQZ_OK;
}

void sqz_unmap(sqz_mapping *m) {
    if (!m) return;
    if (m->data) munmap((void *)m->data, m->size);
    free(m->path);
    free(m);
}

sqz_status sqz_read_file(const char *path, size_t max_bytes, char **out, size_t *len) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    SQZ_RETURN_IF(!f, SQZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max_bytes) {
        fclose(f);
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: %lld bytes, more than the %zu this file may have", path,
                         (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = sqz__malloc(n + 1);
    if (!buf) { fclose(f); return SQZ_ERR_NOMEM; }
    size_t got = fread(buf, 1, n, f);
    int err = ferror(f);
    fclose(f);
    if (got != n || err) {
        free(buf);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: short read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return SQZ_OK;
}
