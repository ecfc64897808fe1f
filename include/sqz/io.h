/*
 * sqz/io.h - memory-mapped inputs and atomic outputs.
 *
 * Inputs are mapped read-only; nothing is read until a page is touched, so opening
 * a model costs its headers only.
 *
 * Outputs are atomic: an sqz_outfile writes to a temporary file in the target's
 * directory and only sqz_outfile_commit() (fsync, rename, fsync of the directory)
 * makes it appear under its name. An error (sqz_outfile_abort) or an interrupt
 * (after sqz_io_cleanup_on_signals) removes the temporary: no partial output is
 * ever left behind. An sqz_outdir does the same for a directory of files.
 */
#ifndef SQZ_IO_H
#define SQZ_IO_H

#include <stddef.h>
#include <stdint.h>

#include "sqz/api.h"
#include "sqz/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sqz_mapping {
    const uint8_t *data; /* size bytes, read-only; NULL when size == 0 */
    size_t size;
    char *path;          /* owned copy of the path */
} sqz_mapping;

/* Maps a whole file read-only. On success *out is owned by the caller (sqz_unmap).
 * Errors: SQZ_ERR_IO naming the file and the OS reason. */
SQZ_API sqz_status sqz_map(const char *path, sqz_mapping **out);
/* Unmaps and frees. NULL is fine. */
SQZ_API void sqz_unmap(sqz_mapping *m);

/* Reads a whole (small) file into a NUL-terminated heap buffer (caller frees).
 * Refuses files larger than max_bytes with SQZ_ERR_FORMAT. *len may be NULL. */
SQZ_API sqz_status sqz_read_file(const char *path, size_t max_bytes, char **out, size_t *len);

typedef struct sqz_outfile sqz_outfile;

/* Opens a temporary file beside `path` for writing. Caller owns the handle and must
 * end it with commit or abort. */
SQZ_API sqz_status sqz_outfile_open(const char *path, sqz_outfile **out);
/* Writes n bytes (buffered). */
SQZ_API sqz_status sqz_outfile_write(sqz_outfile *f, const void *buf, size_t n);
/* Writes zero bytes until the offset is a multiple of `align`. */
SQZ_API sqz_status sqz_outfile_pad(sqz_outfile *f, size_t align);
/* Bytes written so far. */
SQZ_API uint64_t sqz_outfile_tell(const sqz_outfile *f);
/* Flushes, fsyncs and renames the temporary to the final path; frees the handle in
 * every case. On failure the temporary is removed. */
SQZ_API sqz_status sqz_outfile_commit(sqz_outfile *f);
/* Removes the temporary and frees the handle. NULL is fine. */
SQZ_API void sqz_outfile_abort(sqz_outfile *f);

typedef struct sqz_outdir sqz_outdir;

/* Starts writing a directory `path` (created if missing; an existing directory is
 * updated file by file). Files are staged in a temporary directory beside it. */
SQZ_API sqz_status sqz_outdir_open(const char *path, sqz_outdir **out);
/* Opens file `name` (no slashes) inside the staged directory. */
SQZ_API sqz_status sqz_outdir_file(sqz_outdir *d, const char *name, sqz_outfile **out);
/* Moves the staged files into place; frees the handle in every case. */
SQZ_API sqz_status sqz_outdir_commit(sqz_outdir *d);
/* Removes the staged directory and its files; frees the handle. NULL is fine. */
SQZ_API void sqz_outdir_abort(sqz_outdir *d);

/* Installs SIGINT/SIGTERM/SIGHUP handlers that remove every temporary output still
 * open, then re-raise the signal. For programs (the CLI), not for libraries. */
SQZ_API void sqz_io_cleanup_on_signals(void);

#ifdef __cplusplus
}
#endif
#endif
