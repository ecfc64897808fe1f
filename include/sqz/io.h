/*
 * sqz/io.h - memory-mapped inputs and atomic outputs.
 *
 * Inputs are mapped read-only; nothing is read until a page is touched, so opening
 * a model costs its headers only.
 *
 * Inputs are opened without blocking and must be regular files (a FIFO, a device or a
 * socket is refused, never waited on).
 *
 * Outputs are atomic: an sqz_outfile writes to a temporary file "TARGET.sqztmp.PID.XXXXXX"
 * in the target's directory and only sqz_outfile_commit() (fsync, rename, fsync of the
 * directory) makes it appear under its name. An error (sqz_outfile_abort) or a signal
 * (after sqz_io_cleanup_on_signals) removes the temporary: no partial output is ever left
 * behind. A SIGKILL cannot be caught: its temporaries are removed by the next sqz_outfile /
 * sqz_outdir opened in the same directory (the owner's PID is in the name). An sqz_outdir
 * does the same for a directory of files, and replaces an existing directory as a whole,
 * never merging into it. A program can also defer every commit to one point
 * (sqz_io_defer_begin / sqz_io_defer_end): all its outputs appear together, or none.
 */
#ifndef SQZ_IO_H
#define SQZ_IO_H

#include <stdbool.h>
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

/* Whether `path` may be replaced by an output: it does not exist, or is a regular file, or
 * (with SQZ_OUTPUT_DIR) is a directory that an sqz_outdir wrote (it holds SQZ_OUTDIR_MARKER)
 * or an empty one (or any directory with SQZ_OUTPUT_REPLACE). A FIFO, a device, a socket is
 * never replaced. Errors: SQZ_ERR_IO naming the path and what it is. */
#define SQZ_OUTPUT_DIR 0x1u     /* the output is a directory (sqz_outdir) */
#define SQZ_OUTPUT_REPLACE 0x2u /* SQZ_OUTPUT_DIR: replace any existing directory (--force) */
#define SQZ_OUTDIR_MARKER ".sqz-output"
SQZ_API sqz_status sqz_output_check(const char *path, unsigned flags);

/* Opens a temporary file beside `path` for writing (after sqz_output_check(path, 0); stale
 * temporaries of dead processes beside it are removed first). Caller owns the handle and
 * must end it with commit or abort. */
SQZ_API sqz_status sqz_outfile_open(const char *path, sqz_outfile **out);
/* Writes n bytes (buffered). */
SQZ_API sqz_status sqz_outfile_write(sqz_outfile *f, const void *buf, size_t n);
/* Writes zero bytes until the offset is a multiple of `align`. */
SQZ_API sqz_status sqz_outfile_pad(sqz_outfile *f, size_t align);
/* Bytes written so far. */
SQZ_API uint64_t sqz_outfile_tell(const sqz_outfile *f);
/* Flushes, fsyncs and renames the temporary to the final path (while commits are deferred,
 * the rename waits for sqz_io_defer_end); frees the handle in every case. On failure the
 * temporary is removed. */
SQZ_API sqz_status sqz_outfile_commit(sqz_outfile *f);
/* Removes the temporary and frees the handle. NULL is fine. */
SQZ_API void sqz_outfile_abort(sqz_outfile *f);

typedef struct sqz_outdir sqz_outdir;

/* Starts writing a directory `path`: files are staged in a temporary directory beside it,
 * with an SQZ_OUTDIR_MARKER file, and the commit puts the staged directory in the place of
 * `path`. An existing `path` is replaced as a whole (never merged into) and only when
 * sqz_output_check(path, SQZ_OUTPUT_DIR | flags) allows it. flags: 0 or SQZ_OUTPUT_REPLACE. */
SQZ_API sqz_status sqz_outdir_open(const char *path, sqz_outdir **out);
SQZ_API sqz_status sqz_outdir_open_ex(const char *path, unsigned flags, sqz_outdir **out);
/* Opens file `name` (no slashes) inside the staged directory. */
SQZ_API sqz_status sqz_outdir_file(sqz_outdir *d, const char *name, sqz_outfile **out);
/* Moves the staged directory into place (an old directory at `path` is swapped out and
 * removed; while commits are deferred, this waits for sqz_io_defer_end); frees the handle
 * in every case. */
SQZ_API sqz_status sqz_outdir_commit(sqz_outdir *d);
/* Removes the staged directory and its files; frees the handle. NULL is fine. */
SQZ_API void sqz_outdir_abort(sqz_outdir *d);

/* Installs handlers that remove every temporary output still open, then hand the signal to
 * the previous disposition, for every catchable signal that terminates: INT, TERM, HUP,
 * QUIT, USR1, USR2, ALRM, PIPE, XFSZ, XCPU, VTALRM, PROF, ABRT, BUS, SEGV, FPE, ILL, TRAP,
 * SYS (a signal that was ignored stays ignored: a program that ignores XFSZ first gets an
 * error naming the file-size limit from the write instead). A SIGBUS inside a mapping of
 * sqz_map (its file truncated by another process) instead writes one line to stderr,
 * "sqz: error: PATH: changed or truncated while being read ...", and exits with status 1.
 * For programs (the CLI), not for libraries. */
SQZ_API void sqz_io_cleanup_on_signals(void);

/* For programs: from sqz_io_defer_begin() on, sqz_outfile_commit and sqz_outdir_commit write
 * and fsync everything but leave it staged (and removed by a signal). sqz_io_defer_end(true)
 * then renames every staged output into place, with signals blocked, refusing to put one in
 * the place of a file this process opened as an input (sqz_map, sqz_read_file, a model) or
 * of a directory holding one; (false) removes them all. Before renaming, (true) checks that
 * no input changed size or modification time since it was opened (another process wrote
 * it during the run): if one did, nothing is committed and the error names it. Returns the
 * first error (naming the output or the input; the outputs after it are removed, those
 * before it are in place), SQZ_OK otherwise. */
SQZ_API void sqz_io_defer_begin(void);
/* For programs: from now on every output file and directory is written to /dev/null: no
 * temporary, nothing appears, nothing is left behind even by SIGKILL (the ranks of an MPI
 * job other than rank 0 compute everything and keep nothing). Not undone. */
SQZ_API void sqz_io_discard_outputs(void);
SQZ_API sqz_status sqz_io_defer_end(bool commit);
/* The bytes of the output staged for `path` (a file, or a directory's files summed) while commits
 * are deferred, or of what is at `path` otherwise; -1 when there is neither. For the summary of a
 * command that prints before its outputs are put in place. */
SQZ_API int64_t sqz_io_output_bytes(const char *path);

#ifdef __cplusplus
}
#endif
#endif
