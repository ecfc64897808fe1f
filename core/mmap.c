/* core/mmap.c - read-only file mappings and small whole-file reads. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
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
 * over one of them (sqz__is_input), whatever path named it. Its path, size and modification
 * time when first opened tell whether another process changed it under the run
 * (sqz__inputs_check). */
typedef struct input_id {
    uint64_t dev, ino;
    uint64_t size;
    struct timespec mtime;
    char *path; /* NULL when out of memory: not checked */
} input_id;
#define SQZ__MAX_INPUTS 4096
static input_id g_inputs[SQZ__MAX_INPUTS];
static int g_n_inputs;
static pthread_mutex_t g_inputs_lock = PTHREAD_MUTEX_INITIALIZER;

static void input_seen(const char *path, const struct stat *st) {
    pthread_mutex_lock(&g_inputs_lock);
    bool known = false;
    for (int i = 0; i < g_n_inputs && !known; i++)
        known = g_inputs[i].dev == (uint64_t)st->st_dev && g_inputs[i].ino == (uint64_t)st->st_ino;
    if (!known && g_n_inputs < SQZ__MAX_INPUTS)
        g_inputs[g_n_inputs++] = (input_id){st->st_dev, st->st_ino, (uint64_t)st->st_size, st->st_mtim, strdup(path)};
    pthread_mutex_unlock(&g_inputs_lock);
}

bool sqz__is_input(uint64_t dev, uint64_t ino) {
    pthread_mutex_lock(&g_inputs_lock);
    bool hit = false;
    for (int i = 0; i < g_n_inputs && !hit; i++) hit = g_inputs[i].dev == dev && g_inputs[i].ino == ino;
    pthread_mutex_unlock(&g_inputs_lock);
    return hit;
}

sqz_status sqz__inputs_check(void) {
    pthread_mutex_lock(&g_inputs_lock);
    sqz_status s = SQZ_OK;
    for (int i = 0; i < g_n_inputs && s == SQZ_OK; i++) {
        const input_id *in = &g_inputs[i];
        struct stat st;
        /* Gone, or another file there now (replaced by a rename): what was read is intact. */
        if (!in->path || stat(in->path, &st) != 0) continue;
        if ((uint64_t)st.st_dev != in->dev || (uint64_t)st.st_ino != in->ino) continue;
        if ((uint64_t)st.st_size != in->size)
            s = SQZ_ERROR(SQZ_ERR_IO, "%s: changed or truncated while being read (%llu bytes, now %llu): "
                          "nothing written", in->path, (unsigned long long)in->size,
                          (unsigned long long)st.st_size);
        else if (st.st_mtim.tv_sec != in->mtime.tv_sec || st.st_mtim.tv_nsec != in->mtime.tv_nsec)
            s = SQZ_ERROR(SQZ_ERR_IO, "%s: changed or truncated while being read (modified by another process): "
                          "nothing written", in->path);
    }
    pthread_mutex_unlock(&g_inputs_lock);
    return s;
}

/* Live mappings, for the SIGBUS handler (sqz__mapping_at): a fixed table that the handler
 * reads without a lock. A slot is filled before `used` is set, and cleared before the path
 * it points to is freed. */
#define SQZ__MAX_MAPS 256
typedef struct map_slot {
    volatile sig_atomic_t used;
    const uint8_t *start;
    size_t size;
    const char *path;
} map_slot;
static map_slot g_maps[SQZ__MAX_MAPS];
static pthread_mutex_t g_maps_lock = PTHREAD_MUTEX_INITIALIZER;

static void map_register(const sqz_mapping *m) {
    pthread_mutex_lock(&g_maps_lock);
    for (int i = 0; i < SQZ__MAX_MAPS; i++) {
        if (g_maps[i].used) continue;
        g_maps[i].start = m->data;
        g_maps[i].size = m->size;
        g_maps[i].path = m->path;
        __atomic_store_n(&g_maps[i].used, 1, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&g_maps_lock);
}

static void map_unregister(const sqz_mapping *m) {
    pthread_mutex_lock(&g_maps_lock);
    for (int i = 0; i < SQZ__MAX_MAPS; i++)
        if (g_maps[i].used && g_maps[i].start == m->data) __atomic_store_n(&g_maps[i].used, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&g_maps_lock);
}

const char *sqz__mapping_at(const void *addr) {
    const uintptr_t a = (uintptr_t)addr;
    for (int i = 0; i < SQZ__MAX_MAPS; i++) {
        if (!__atomic_load_n(&g_maps[i].used, __ATOMIC_ACQUIRE)) continue;
        const uintptr_t s = (uintptr_t)g_maps[i].start;
        if (a >= s && a - s < g_maps[i].size) return g_maps[i].path;
    }
    return NULL;
}

bool sqz__mapping_release(const void *addr, size_t n) {
    const char *path = n ? sqz__mapping_at(addr) : NULL;
    if (!path || path != sqz__mapping_at((const uint8_t *)addr + n - 1)) return false;
    const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t a = ((uintptr_t)addr + pg - 1) & ~(pg - 1), e = ((uintptr_t)addr + n) & ~(pg - 1);
    if (e > a) (void)madvise((void *)a, e - a, MADV_DONTNEED); /* private: the file's pages again; shared
                                                                 * (spill): the file keeps what was written */
    return true;
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
    input_seen(path, &st);
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
    if (m->data) map_register(m);
    *out = m;
    return SQZ_OK;
}

sqz_status sqz__map_spill(size_t size, sqz_mapping **out) {
    *out = NULL;
    const char *dir = getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    char path[4096];
    SQZ_RETURN_IF((size_t)snprintf(path, sizeof path, "%s/sqz-spill-XXXXXX", dir) >= sizeof path, SQZ_ERR_IO,
                  "TMPDIR is too long");
    int fd = mkstemp(path);
    SQZ_RETURN_IF(fd < 0, SQZ_ERR_IO, "%s: cannot create a scratch file: %s", path, strerror(errno));
    (void)unlink(path); /* gone when unmapped, whatever happens to this process */
    int e = size ? posix_fallocate(fd, 0, (off_t)size) : 0;
    void *p = e == 0 && size ? mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : NULL;
    if (e == 0 && p == MAP_FAILED) e = errno;
    close(fd);
    SQZ_RETURN_IF(e != 0, SQZ_ERR_IO, "%s: cannot reserve %zu bytes of scratch: %s", path, size, strerror(e));
    sqz_mapping *m = sqz__calloc(1, sizeof *m);
    char *name = sqz__strdup(path);
    if (!m || !name) {
        if (p) munmap(p, size);
        free(m);
        free(name);
        return SQZ_ERR_NOMEM;
    }
    m->data = p;
    m->size = size;
    m->path = name;
    if (m->data) map_register(m);
    *out = m;
    return SQZ_OK;
}

void sqz_unmap(sqz_mapping *m) {
    if (!m) return;
    if (m->data) {
        map_unregister(m);
        munmap((void *)m->data, m->size);
    }
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
        if (err) return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot read (%zu of %zu bytes read)", path, got, n);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: changed or truncated while being read (%zu of %zu bytes)", path, got, n);
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return SQZ_OK;
}
