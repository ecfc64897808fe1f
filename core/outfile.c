/*
 * core/outfile.c - atomic outputs: temporary file beside the target, fsync, rename.
 *
 * Live temporaries are listed in a fixed table so that a signal handler can remove
 * them with async-signal-safe calls only (unlink, rmdir). The table is the one piece
 * of mutable global state in libsqz; it is guarded by a mutex outside the handler.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "sqz/io.h"

#define SQZ__MAX_TEMPS 64
#define SQZ__BUF_CAP (1u << 20)

typedef struct temp_slot {
    volatile sig_atomic_t used;
    volatile sig_atomic_t is_dir;
    char path[PATH_MAX];
} temp_slot;

static temp_slot g_temps[SQZ__MAX_TEMPS];
static pthread_mutex_t g_temps_lock = PTHREAD_MUTEX_INITIALIZER;

static int temp_register(const char *path, int is_dir) {
    pthread_mutex_lock(&g_temps_lock);
    int slot = -1;
    for (int i = 0; i < SQZ__MAX_TEMPS; i++) {
        if (!g_temps[i].used) {
            snprintf(g_temps[i].path, sizeof g_temps[i].path, "%s", path);
            g_temps[i].is_dir = is_dir;
            g_temps[i].used = 1;
            slot = i;
            break;
        }
    }
    pthread_mutex_unlock(&g_temps_lock);
    return slot;
}

static void temp_unregister(int slot) {
    if (slot < 0) return;
    pthread_mutex_lock(&g_temps_lock);
    g_temps[slot].used = 0;
    pthread_mutex_unlock(&g_temps_lock);
}

static void cleanup_handler(int sig) {
    /* Files first, then the directories that held them. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = SQZ__MAX_TEMPS - 1; i >= 0; i--) {
            if (!g_temps[i].used || g_temps[i].is_dir != pass) continue;
            if (pass == 0) unlink(g_temps[i].path);
            else rmdir(g_temps[i].path);
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void sqz_io_cleanup_on_signals(void) {
    struct sigaction sa = {0};
    sa.sa_handler = cleanup_handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
}

struct sqz_outfile {
    int fd;
    char *path;     /* final */
    char *tmp;      /* temporary */
    int slot;
    uint64_t written;
    size_t buf_len;
    bool failed;
    uint8_t *buf;
};

sqz_status sqz_outfile_open(const char *path, sqz_outfile **out) {
    *out = NULL;
    SQZ_RETURN_IF(sqz__is_dir(path), SQZ_ERR_IO, "%s: is a directory", path);
    sqz_outfile *f = sqz__calloc(1, sizeof *f);
    if (!f) return SQZ_ERR_NOMEM;
    f->fd = -1;
    f->slot = -1;
    f->path = sqz__strdup(path);
    f->tmp = sqz__asprintf("%s.sqztmp.XXXXXX", path);
    f->buf = sqz__malloc(SQZ__BUF_CAP);
    if (!f->path || !f->tmp || !f->buf) { sqz_outfile_abort(f); return SQZ_ERR_NOMEM; }
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0) {
        int e = errno;
        sqz_outfile_abort(f);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, strerror(e));
    }
    f->slot = temp_register(f->tmp, 0);
    fchmod(f->fd, 0644);
    *out = f;
    return SQZ_OK;
}

static sqz_status flush_buf(sqz_outfile *f) {
    size_t off = 0;
    while (off < f->buf_len) {
        ssize_t w = write(f->fd, f->buf + off, f->buf_len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            f->failed = true;
            return SQZ_ERROR(SQZ_ERR_IO, "%s: write failed: %s", f->path, w < 0 ? strerror(errno) : "no progress");
        }
        off += (size_t)w;
    }
    f->buf_len = 0;
    return SQZ_OK;
}

sqz_status sqz_outfile_write(sqz_outfile *f, const void *data, size_t n) {
    SQZ_RETURN_IF(f->failed, SQZ_ERR_IO, "%s: earlier write failed", f->path);
    const uint8_t *p = data;
    while (n > 0) {
        size_t take = SQZ__BUF_CAP - f->buf_len;
        if (take > n) take = n;
        memcpy(f->buf + f->buf_len, p, take);
        f->buf_len += take;
        p += take;
        n -= take;
        f->written += take;
        if (f->buf_len == SQZ__BUF_CAP) SQZ_TRY(flush_buf(f));
    }
    return SQZ_OK;
}

sqz_status sqz_outfile_pad(sqz_outfile *f, size_t align) {
    static const uint8_t zeros[64];
    while (align > 1 && f->written % align != 0) {
        size_t n = align - (size_t)(f->written % align);
        if (n > sizeof zeros) n = sizeof zeros;
        SQZ_TRY(sqz_outfile_write(f, zeros, n));
    }
    return SQZ_OK;
}

uint64_t sqz_outfile_tell(const sqz_outfile *f) { return f->written; }

static void fsync_dir_of(const char *path) {
    char *dir = sqz__dirname(path);
    if (!dir) return;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    free(dir);
}

sqz_status sqz_outfile_commit(sqz_outfile *f) {
    sqz_status s = flush_buf(f);
    if (s == SQZ_OK && fsync(f->fd) != 0) s = SQZ_ERROR(SQZ_ERR_IO, "%s: fsync failed: %s", f->path, strerror(errno));
    if (s == SQZ_OK && close(f->fd) != 0) s = SQZ_ERROR(SQZ_ERR_IO, "%s: close failed: %s", f->path, strerror(errno));
    else if (s != SQZ_OK) close(f->fd);
    f->fd = -1;
    if (s == SQZ_OK && rename(f->tmp, f->path) != 0) {
        s = SQZ_ERROR(SQZ_ERR_IO, "%s: cannot rename the temporary into place: %s", f->path, strerror(errno));
    }
    if (s != SQZ_OK) {
        unlink(f->tmp);
    } else {
        fsync_dir_of(f->path);
    }
    temp_unregister(f->slot);
    f->slot = -1;
    free(f->tmp);
    f->tmp = NULL;
    sqz_outfile_abort(f);
    return s;
}

void sqz_outfile_abort(sqz_outfile *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    temp_unregister(f->slot);
    free(f->tmp);
    free(f->path);
    free(f->buf);
    free(f);
}

/* ---- directories ---- */

#define SQZ__MAX_DIR_FILES 32

struct sqz_outdir {
    char *path;
    char *tmp;
    int slot;
    int n_files;
    char *files[SQZ__MAX_DIR_FILES];  /* names committed into tmp */
    int file_slots[SQZ__MAX_DIR_FILES];
};

sqz_status sqz_outdir_open(const char *path, sqz_outdir **out) {
    *out = NULL;
    struct stat st;
    SQZ_RETURN_IF(stat(path, &st) == 0 && !S_ISDIR(st.st_mode), SQZ_ERR_IO,
                  "%s: exists and is not a directory", path);
    sqz_outdir *d = sqz__calloc(1, sizeof *d);
    if (!d) return SQZ_ERR_NOMEM;
    d->slot = -1;
    d->path = sqz__strdup(path);
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    d->tmp = sqz__asprintf("%.*s.sqztmp.XXXXXX", (int)n, path);
    if (!d->path || !d->tmp) { sqz_outdir_abort(d); return SQZ_ERR_NOMEM; }
    if (!mkdtemp(d->tmp)) {
        int e = errno;
        free(d->tmp);
        d->tmp = NULL;
        sqz_outdir_abort(d);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot create a temporary directory beside it: %s", path, strerror(e));
    }
    chmod(d->tmp, 0755); /* mkdtemp makes it 0700; an output directory is an ordinary directory */
    d->slot = temp_register(d->tmp, 1);
    *out = d;
    return SQZ_OK;
}

sqz_status sqz_outdir_file(sqz_outdir *d, const char *name, sqz_outfile **out) {
    SQZ_RETURN_IF(strchr(name, '/') || d->n_files >= SQZ__MAX_DIR_FILES, SQZ_ERR_INVALID_ARG,
                  "%s: cannot stage file '%s'", d->path, name);
    char *p = sqz__path_join(d->tmp, name);
    if (!p) return SQZ_ERR_NOMEM;
    sqz_status s = sqz_outfile_open(p, out);
    if (s == SQZ_OK) {
        /* Remember the final staged name so that abort and the signal handler remove it. */
        d->files[d->n_files] = p;
        d->file_slots[d->n_files] = temp_register(p, 0);
        d->n_files++;
    } else {
        free(p);
    }
    return s;
}

sqz_status sqz_outdir_commit(sqz_outdir *d) {
    sqz_status s = SQZ_OK;
    if (!sqz__is_dir(d->path)) {
        if (rename(d->tmp, d->path) != 0) {
            s = SQZ_ERROR(SQZ_ERR_IO, "%s: cannot move the staged directory into place: %s", d->path, strerror(errno));
        } else {
            for (int i = 0; i < d->n_files; i++) { temp_unregister(d->file_slots[i]); free(d->files[i]); }
            d->n_files = 0;
            temp_unregister(d->slot);
            d->slot = -1;
            free(d->tmp);
            d->tmp = NULL;
        }
    } else {
        for (int i = 0; i < d->n_files && s == SQZ_OK; i++) {
            char *dst = sqz__path_join(d->path, sqz__basename(d->files[i]));
            if (!dst) { s = SQZ_ERR_NOMEM; break; }
            if (rename(d->files[i], dst) != 0) {
                s = SQZ_ERROR(SQZ_ERR_IO, "%s: cannot move into place: %s", dst, strerror(errno));
            }
            free(dst);
        }
    }
    if (s == SQZ_OK) fsync_dir_of(d->path);
    sqz_outdir_abort(d);
    return s;
}

void sqz_outdir_abort(sqz_outdir *d) {
    if (!d) return;
    for (int i = 0; i < d->n_files; i++) {
        unlink(d->files[i]);
        temp_unregister(d->file_slots[i]);
        free(d->files[i]);
    }
    if (d->tmp) rmdir(d->tmp);
    temp_unregister(d->slot);
    free(d->tmp);
    free(d->path);
    free(d);
}
