/*
 * core/outfile.c - atomic outputs: temporary file beside the target, fsync, rename; staged
 * directories put in place as a whole; commits deferred to one point for a program whose
 * outputs must appear together. The temporaries' registry and signals are core/temps.c.
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
#include "core/temps.h"
#include "sqz/io.h"

#define SQZ__BUF_CAP (1u << 20)

/* Why a write or a create failed, in the words a user acts on: the limits a run meets
 * (the CLI ignores SIGXFSZ so that a file-size limit is an EFBIG here, not a silent death). */
static const char *write_cause(int e) {
    if (e == EFBIG) return "file size limit (ulimit -f) reached";
    if (e == ENOSPC) return "no space left on the device";
#ifdef EDQUOT
    if (e == EDQUOT) return "disk quota exceeded";
#endif
    return strerror(e);
}

/* ---- what may be replaced --------------------------------------------------------------- */

static bool dir_replaceable(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    bool empty = true, marked = false;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        empty = false;
        if (!strcmp(e->d_name, SQZ_OUTDIR_MARKER)) marked = true;
    }
    closedir(d);
    return empty || marked;
}

sqz_status sqz_output_check(const char *path, unsigned flags) {
    struct stat st;
    SQZ_RETURN_IF(!path || !*path, SQZ_ERR_INVALID_ARG, "an empty output path");
    if (stat(path, &st) != 0) return SQZ_OK; /* to be created (a missing directory fails at open) */
    if (S_ISREG(st.st_mode)) {
        SQZ_RETURN_IF(flags & SQZ_OUTPUT_DIR, SQZ_ERR_IO, "%s: exists and is a file, not a directory", path);
        return SQZ_OK;
    }
    SQZ_RETURN_IF(!S_ISDIR(st.st_mode), SQZ_ERR_IO, "%s: exists and is a %s, not a regular file: not replacing it",
                  path, sqz__file_kind(st.st_mode));
    SQZ_RETURN_IF(!(flags & SQZ_OUTPUT_DIR), SQZ_ERR_IO, "%s: is a directory", path);
    SQZ_RETURN_IF(!(flags & SQZ_OUTPUT_REPLACE) && !dir_replaceable(path), SQZ_ERR_IO,
                  "%s: an existing directory that sqz did not write (no %s in it): not replacing it", path,
                  SQZ_OUTDIR_MARKER);
    return SQZ_OK;
}

/* An output of a program's run (commits deferred) must not take the place of a file the run
 * read, nor of a directory that holds one: checked right before each rename, whatever path
 * named the input. (A library caller may well read a file, close it and write over it.) */
static sqz_status not_an_input(const char *path, bool is_dir) {
    struct stat st;
    if (stat(path, &st) != 0) return SQZ_OK;
    SQZ_RETURN_IF(sqz__is_input((uint64_t)st.st_dev, (uint64_t)st.st_ino), SQZ_ERR_IO,
                  "%s: is an input of this run: an output never replaces an input", path);
    DIR *d = is_dir && S_ISDIR(st.st_mode) ? opendir(path) : NULL;
    struct dirent *e;
    sqz_status s = SQZ_OK;
    while (d && s == SQZ_OK && (e = readdir(d))) {
        struct stat fs;
        if (fstatat(dirfd(d), e->d_name, &fs, AT_SYMLINK_NOFOLLOW) == 0 &&
            sqz__is_input((uint64_t)fs.st_dev, (uint64_t)fs.st_ino) && strcmp(e->d_name, ".."))
            s = SQZ_ERROR(SQZ_ERR_IO, "%s: holds %s, an input of this run: an output never replaces an input", path,
                          e->d_name);
    }
    if (d) closedir(d);
    return s;
}

/* ---- deferred commits ------------------------------------------------------------------ */

typedef struct deferred {
    sqz_outfile *f; /* one of the two */
    sqz_outdir *d;
} deferred;

static struct {
    bool on;
    int n, cap;
    deferred *list;
} g_defer;
static pthread_mutex_t g_defer_lock = PTHREAD_MUTEX_INITIALIZER;
static bool g_discard; /* sqz_io_discard_outputs: every output goes to /dev/null */

void sqz_io_discard_outputs(void) { g_discard = true; }

/* While commits are deferred, takes a finished output (true) and sets *st: SQZ_OK, staged
 * until sqz_io_defer_end; or an error, the output removed: an input changed under the run
 * (checked as each output is finished, so that a command does not report an output it will
 * not commit), or out of memory. False when commits are not deferred: the caller puts the
 * output in place now. */
static bool defer_push(sqz_outfile *f, sqz_outdir *d, sqz_status *st) {
    pthread_mutex_lock(&g_defer_lock);
    const bool on = g_defer.on;
    pthread_mutex_unlock(&g_defer_lock);
    if (!on) return false;
    sqz_status s = sqz__inputs_check();
    pthread_mutex_lock(&g_defer_lock);
    if (s == SQZ_OK && g_defer.n == g_defer.cap) {
        int cap = g_defer.cap ? 2 * g_defer.cap : 8;
        deferred *l = sqz__realloc(g_defer.list, (size_t)cap * sizeof *l);
        if (l) {
            g_defer.list = l;
            g_defer.cap = cap;
        } else {
            s = SQZ_ERR_NOMEM;
        }
    }
    if (s == SQZ_OK) g_defer.list[g_defer.n++] = (deferred){f, d};
    pthread_mutex_unlock(&g_defer_lock);
    if (s != SQZ_OK) {
        sqz_outfile_abort(f);
        sqz_outdir_abort(d);
    }
    *st = s;
    return true;
}

struct sqz_outfile {
    int fd;
    char *path;     /* final */
    char *tmp;      /* temporary */
    char *shown;    /* the name in messages when not path: DIR/NAME for a file of an sqz_outdir */
    int slot;
    bool in_dir;    /* a file of an sqz_outdir: committed into the staged directory at once */
    bool scratch;   /* sqz__outfile_open_scratch: put in place at once, never deferred */
    bool discard;   /* written to /dev/null (sqz_io_discard_outputs) */
    uint64_t written;
    size_t buf_len;
    bool failed;
    int err;        /* errno of the failed write */
    uint8_t *buf;
};

sqz_status sqz_outfile_open(const char *path, sqz_outfile **out) {
    *out = NULL;
    if (g_discard) { /* no temporary, nothing on disk, nothing to remove after a SIGKILL */
        sqz_outfile *f = sqz__calloc(1, sizeof *f);
        if (!f) return SQZ_ERR_NOMEM;
        f->slot = -1;
        f->discard = true;
        f->path = sqz__strdup(path);
        f->buf = sqz__malloc(SQZ__BUF_CAP);
        f->fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (!f->path || !f->buf || f->fd < 0) { sqz_outfile_abort(f); return SQZ_ERR_NOMEM; }
        *out = f;
        return SQZ_OK;
    }
    SQZ_TRY(sqz_output_check(path, 0));
    sqz__temp_sweep(path);
    sqz_outfile *f = sqz__calloc(1, sizeof *f);
    if (!f) return SQZ_ERR_NOMEM;
    f->fd = -1;
    f->slot = -1;
    f->path = sqz__strdup(path);
    f->tmp = sqz__temp_template(path);
    f->buf = sqz__malloc(SQZ__BUF_CAP);
    if (!f->path || !f->tmp || !f->buf) { sqz_outfile_abort(f); return SQZ_ERR_NOMEM; }
    f->fd = mkstemp(f->tmp);
    if (f->fd < 0) {
        int e = errno;
        free(f->tmp);
        f->tmp = NULL;
        sqz_outfile_abort(f);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot create a temporary file beside it: %s", path, write_cause(e));
    }
    f->slot = sqz__temp_register(f->tmp, 0);
    fchmod(f->fd, 0644);
    *out = f;
    return SQZ_OK;
}

static const char *shown(const sqz_outfile *f) { return f->shown ? f->shown : f->path; }

/* Writes the buffer out. A short write is continued; the write after it says why (EFBIG at
 * the file-size limit, ENOSPC, EDQUOT); a write that makes no progress is taken as a full
 * device. The failure is sticky and keeps its cause. */
static sqz_status flush_buf(sqz_outfile *f) {
    size_t off = 0;
    while (off < f->buf_len) {
        ssize_t w = write(f->fd, f->buf + off, f->buf_len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            f->failed = true;
            f->err = w < 0 ? errno : ENOSPC;
            return SQZ_ERROR(SQZ_ERR_IO, "%s: write failed: %s", shown(f), write_cause(f->err));
        }
        off += (size_t)w;
    }
    f->buf_len = 0;
    return SQZ_OK;
}

sqz_status sqz_outfile_write(sqz_outfile *f, const void *data, size_t n) {
    SQZ_RETURN_IF(f->failed, SQZ_ERR_IO, "%s: write failed: %s", shown(f), write_cause(f->err));
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

/* Flush, fsync, close: the temporary holds the whole output. */
static sqz_status outfile_finish(sqz_outfile *f) {
    sqz_status s = flush_buf(f);
    /* (a file system that allocates late, NFS, reports a full device at fsync or close) */
    if (s == SQZ_OK && !f->discard && fsync(f->fd) != 0)
        s = SQZ_ERROR(SQZ_ERR_IO, "%s: fsync failed: %s", shown(f), write_cause(errno));
    if (s == SQZ_OK && close(f->fd) != 0) s = SQZ_ERROR(SQZ_ERR_IO, "%s: close failed: %s", shown(f), write_cause(errno));
    else if (s != SQZ_OK) close(f->fd);
    f->fd = -1;
    return s;
}

/* Renames the finished temporary into place; frees the handle. */
static sqz_status outfile_place(sqz_outfile *f, bool deferred) {
    sqz_status s = sqz_output_check(f->path, 0);
    if (s == SQZ_OK && deferred) s = not_an_input(f->path, false);
    if (s == SQZ_OK && rename(f->tmp, f->path) != 0)
        s = SQZ_ERROR(SQZ_ERR_IO, "%s: cannot rename the temporary into place: %s", f->path, strerror(errno));
    if (s == SQZ_OK) {
        fsync_dir_of(f->path);
        free(f->tmp);
        f->tmp = NULL;
    }
    sqz_outfile_abort(f);
    return s;
}

sqz_status sqz__outfile_open_scratch(const char *path, sqz_outfile **out) {
    SQZ_TRY(sqz_outfile_open(path, out));
    (*out)->scratch = true;
    return SQZ_OK;
}

sqz_status sqz_outfile_commit(sqz_outfile *f) {
    sqz_status s = outfile_finish(f);
    if (s != SQZ_OK) {
        sqz_outfile_abort(f);
        return s;
    }
    if (f->discard) {
        sqz_outfile_abort(f);
        return SQZ_OK;
    }
    if (!f->in_dir && !f->scratch && defer_push(f, NULL, &s)) return s;
    return outfile_place(f, false);
}

void sqz_outfile_abort(sqz_outfile *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    sqz__temp_unregister(f->slot);
    free(f->tmp);
    free(f->path);
    free(f->shown);
    free(f->buf);
    free(f);
}

/* ---- directories ---- */

#define SQZ__MAX_DIR_FILES 32

struct sqz_outdir {
    char *path;
    char *tmp;
    int slot;
    unsigned flags; /* SQZ_OUTPUT_* */
    int n_files;
    char *files[SQZ__MAX_DIR_FILES];  /* names committed into tmp */
    int file_slots[SQZ__MAX_DIR_FILES];
};

static sqz_status write_marker(sqz_outdir *d) {
    sqz_outfile *f;
    SQZ_TRY(sqz_outdir_file(d, SQZ_OUTDIR_MARKER, &f));
    static const char text[] = "written by sqz: `sqz convert` and `sqz compress` may replace this directory\n";
    sqz_status s = sqz_outfile_write(f, text, sizeof text - 1);
    if (s != SQZ_OK) {
        sqz_outfile_abort(f);
        return s;
    }
    return sqz_outfile_commit(f);
}

sqz_status sqz_outdir_open_ex(const char *path, unsigned flags, sqz_outdir **out) {
    *out = NULL;
    flags = (flags & SQZ_OUTPUT_REPLACE) | SQZ_OUTPUT_DIR;
    SQZ_TRY(sqz_output_check(path, flags));
    sqz__temp_sweep(path);
    sqz_outdir *d = sqz__calloc(1, sizeof *d);
    if (!d) return SQZ_ERR_NOMEM;
    d->slot = -1;
    d->flags = flags;
    d->path = sqz__strdup(path);
    if (g_discard) { /* its files go to /dev/null; no staged directory */
        if (!d->path) { sqz_outdir_abort(d); return SQZ_ERR_NOMEM; }
        *out = d;
        return SQZ_OK;
    }
    d->tmp = sqz__temp_template(path);
    if (!d->path || !d->tmp) { sqz_outdir_abort(d); return SQZ_ERR_NOMEM; }
    if (!mkdtemp(d->tmp)) {
        int e = errno;
        free(d->tmp);
        d->tmp = NULL;
        sqz_outdir_abort(d);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot create a temporary directory beside it: %s", path, write_cause(e));
    }
    chmod(d->tmp, 0755); /* mkdtemp makes it 0700; an output directory is an ordinary directory */
    d->slot = sqz__temp_register(d->tmp, 1);
    sqz_status s = write_marker(d);
    if (s != SQZ_OK) {
        sqz_outdir_abort(d);
        return s;
    }
    *out = d;
    return SQZ_OK;
}

sqz_status sqz_outdir_open(const char *path, sqz_outdir **out) { return sqz_outdir_open_ex(path, 0, out); }

sqz_status sqz_outdir_file(sqz_outdir *d, const char *name, sqz_outfile **out) {
    SQZ_RETURN_IF(strchr(name, '/') || d->n_files >= SQZ__MAX_DIR_FILES, SQZ_ERR_INVALID_ARG,
                  "%s: cannot stage file '%s'", d->path, name);
    if (!d->tmp) return sqz_outfile_open(name, out); /* discarded */
    char *p = sqz__path_join(d->tmp, name);
    if (!p) return SQZ_ERR_NOMEM;
    sqz_status s = sqz_outfile_open(p, out);
    if (s == SQZ_OK) {
        (*out)->in_dir = true;
        (*out)->shown = sqz__path_join(d->path, name); /* NULL: messages name the staged file */
        /* Remember the final staged name so that abort and the signal handler remove it. */
        d->files[d->n_files] = p;
        d->file_slots[d->n_files] = sqz__temp_register(p, 0);
        d->n_files++;
    } else {
        free(p);
    }
    return s;
}

/* Puts the staged directory in the place of d->path: a rename when nothing is there, else an
 * atomic exchange with the old directory (which then lies at the temporary name and is
 * removed). Never merges. */
static sqz_status outdir_place(sqz_outdir *d, bool deferred) {
    struct stat st;
    if (stat(d->path, &st) != 0) {
        if (rename(d->tmp, d->path) == 0) return SQZ_OK;
        /* Another process committed the same output since the stat: swap it out as below, so
         * that the later commit wins whole (two writers never mix, neither fails). */
        SQZ_RETURN_IF(errno != ENOTEMPTY && errno != EEXIST, SQZ_ERR_IO,
                      "%s: cannot move the staged directory into place: %s", d->path, strerror(errno));
    }
    SQZ_TRY(sqz_output_check(d->path, d->flags));
    if (deferred) SQZ_TRY(not_an_input(d->path, true));
    if (renameat2(AT_FDCWD, d->tmp, AT_FDCWD, d->path, RENAME_EXCHANGE) == 0) {
        sqz__remove_tree(d->tmp); /* the old directory */
        return SQZ_OK;
    }
    /* No exchange on this file system: move the old one aside first (a short window in which
     * d->path is missing, never one in which it is mixed). */
    char *old = sqz__asprintf("%s.old", d->tmp);
    if (!old) return SQZ_ERR_NOMEM;
    sqz_status s = SQZ_OK;
    if (rename(d->path, old) != 0) {
        s = SQZ_ERROR(SQZ_ERR_IO, "%s: cannot move the old directory aside: %s", d->path, strerror(errno));
    } else if (rename(d->tmp, d->path) != 0) {
        s = SQZ_ERROR(SQZ_ERR_IO, "%s: cannot move the staged directory into place: %s", d->path, strerror(errno));
        rename(old, d->path);
    } else {
        sqz__remove_tree(old);
    }
    free(old);
    return s;
}

static sqz_status outdir_commit_now(sqz_outdir *d, bool deferred) {
    sqz_status s = outdir_place(d, deferred);
    if (s == SQZ_OK) {
        for (int i = 0; i < d->n_files; i++) { sqz__temp_unregister(d->file_slots[i]); free(d->files[i]); }
        d->n_files = 0;
        sqz__temp_unregister(d->slot);
        d->slot = -1;
        free(d->tmp);
        d->tmp = NULL;
        fsync_dir_of(d->path);
    }
    sqz_outdir_abort(d);
    return s;
}

sqz_status sqz_outdir_commit(sqz_outdir *d) {
    if (!d->tmp) { /* discarded */
        sqz_outdir_abort(d);
        return SQZ_OK;
    }
    sqz_status s;
    if (defer_push(NULL, d, &s)) return s;
    return outdir_commit_now(d, false);
}

void sqz_outdir_abort(sqz_outdir *d) {
    if (!d) return;
    for (int i = 0; i < d->n_files; i++) {
        unlink(d->files[i]);
        sqz__temp_unregister(d->file_slots[i]);
        free(d->files[i]);
    }
    if (d->tmp) rmdir(d->tmp);
    sqz__temp_unregister(d->slot);
    free(d->tmp);
    free(d->path);
    free(d);
}

/* ---- one commit point for a program ---------------------------------------------------- */

void sqz_io_defer_begin(void) {
    pthread_mutex_lock(&g_defer_lock);
    g_defer.on = true;
    pthread_mutex_unlock(&g_defer_lock);
}

sqz_status sqz_io_defer_end(bool commit) {
    pthread_mutex_lock(&g_defer_lock);
    deferred *list = g_defer.list;
    const int n = g_defer.n;
    g_defer.on = false;
    g_defer.list = NULL;
    g_defer.n = g_defer.cap = 0;
    pthread_mutex_unlock(&g_defer_lock);
    /* An input another process changed during the run: what was read may be a mix of its
     * old and new contents, so nothing is committed. */
    sqz_status s = commit ? sqz__inputs_check() : SQZ_OK;
    sigset_t old;
    sqz__temp_block_signals(&old);
    for (int i = 0; i < n; i++) {
        sqz_status si = SQZ_OK;
        if (!commit || s != SQZ_OK) {
            sqz_outfile_abort(list[i].f);
            sqz_outdir_abort(list[i].d);
        } else {
            si = list[i].f ? outfile_place(list[i].f, true) : outdir_commit_now(list[i].d, true);
        }
        if (s == SQZ_OK) s = si;
    }
    sqz__temp_restore_signals(&old);
    free(list);
    return s;
}

/* ---- the size of an output, staged or in place ------------------------------------------- */

static int64_t path_bytes(const char *p) {
    struct stat st;
    if (stat(p, &st) != 0) return -1;
    if (!S_ISDIR(st.st_mode)) return (int64_t)st.st_size;
    DIR *d = opendir(p);
    if (!d) return -1;
    int64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat fs;
        if (fstatat(dirfd(d), e->d_name, &fs, 0) == 0 && S_ISREG(fs.st_mode)) n += (int64_t)fs.st_size;
    }
    closedir(d);
    return n;
}

int64_t sqz_io_output_bytes(const char *path) {
    const char *staged = NULL;
    pthread_mutex_lock(&g_defer_lock);
    for (int i = 0; i < g_defer.n && !staged; i++) {
        if (g_defer.list[i].f && !strcmp(g_defer.list[i].f->path, path)) staged = g_defer.list[i].f->tmp;
        if (g_defer.list[i].d && !strcmp(g_defer.list[i].d->path, path)) staged = g_defer.list[i].d->tmp;
    }
    const int64_t n = path_bytes(staged ? staged : path);
    pthread_mutex_unlock(&g_defer_lock);
    return n;
}
