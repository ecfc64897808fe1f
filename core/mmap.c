/* core/mmap.c - read-only file mappings and small whole-file reads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "sqz/io.h"

const char *sqz__file_kind(unsigned mode) {
    if (S_ISREG(mode)) return "regular file";
    if (S_ISDIR(mode)) return "directory";
    if (S_ISFIFO(mode)) return "FIFO";
    if (S_ISCHR(mode)) return "character device";
    if (S_ISBLK(mode)) return "block device";
    if (S_ISSOCK(mode)) return "socket";
    if (S_ISLNK(mode)) return "symbolic link";
    return "special file";
}

/* Every file this process opened as an input (device, inode): an output is never renamed
 * over one of them (sqz__is_input), whatever path named it. */
typedef struct input_id {
    uint64_t dev, ino;
} input_id;
#define SQZ__MAX_INPUTS 4096
static input_id g_inputs[SQZ__MAX_INPUTS];
static int g_n_inputs;
static pthread_mutex_t g_inputs_lock = PTHREAD_MUTEX_INITIALIZER;

static void input_seen(const struct stat *st) {
    pthread_mutex_lock(&g_inputs_lock);
    bool known = false;
    for (int i = 0; i < g_n_inputs && !known; i++)
        known = g_inputs[i].dev == (uint64_t)st->st_dev && g_inputs[i].ino == (uint64_t)st->st_ino;
    if (!known && g_n_inputs < SQZ__MAX_INPUTS) g_inputs[g_n_inputs++] = (input_id){st->st_dev, st->st_ino};
    pthread_mutex_unlock(&g_inputs_lock);
}

bool sqz__is_input(uint64_t dev, uint64_t ino) {
    pthread_mutex_lock(&g_inputs_lock);
    bool hit = false;
    for (int i = 0; i < g_n_inputs && !hit; i++) hit = g_inputs[i].dev == dev && g_inputs[i].ino == ino;
    pthread_mutex_unlock(&g_inputs_lock);
    return hit;
}

sqz_status sqz__open_regular(const char *path, int *fd_out, uint64_t *size) {
    *fd_out = -1;
    /* O_NONBLOCK: opening a FIFO without a writer would wait forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    SQZ_RETURN_IF(fd < 0, SQZ_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: a %s, not a regular file", path, sqz__file_kind(st.st_mode));
    }
    input_seen(&st);
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    *size = (uint64_t)st.st_size;
    return SQZ_OK;
}

sqz_status sqz_map(const char *path, sqz_mapping **out) {
    *out = NULL;
    int fd;
    uint64_t fsize;
    SQZ_TRY(sqz__open_regular(path, &fd, &fsize));
    SQZ_RETURN_IF(fsize > SIZE_MAX, SQZ_ERR_IO, "%s: too large to map", path);
    sqz_mapping *m = sqz__calloc(1, sizeof *m);
    if (!m) { close(fd); return SQZ_ERR_NOMEM; }
    m->path = sqz__strdup(path);
    m->size = (size_t)fsize;
    if (m->size > 0) {
        void *p = mmap(NULL, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(m->path);
            free(m);
            return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot map %zu bytes: %s", path, (size_t)fsize, strerror(e));
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
    int fd;
    uint64_t size;
    SQZ_TRY(sqz__open_regular(path, &fd, &size));
    if (size > max_bytes) {
        close(fd);
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: %llu bytes, more than the %zu this file may have", path,
                         (unsigned long long)size, max_bytes);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot read: %s", path, strerror(e));
    }
    size_t n = (size_t)size;
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
