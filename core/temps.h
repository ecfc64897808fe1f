/*
 * core/temps.h - internal: the registry of live temporary outputs (removed by the signal
 * handler of sqz_io_cleanup_on_signals), their names, and the sweep of stale ones.
 *
 * A temporary is named "TARGET.sqztmp.PID.XXXXXX": PID is its owner's process id, so that
 * the next run writing beside TARGET removes the temporaries of a process that no longer
 * exists (one killed by SIGKILL, which nothing can catch).
 */
#ifndef SQZ_CORE_TEMPS_H
#define SQZ_CORE_TEMPS_H

#include <signal.h>

#define SQZ__TEMP_TAG ".sqztmp."

/* Adds a temporary to the table (is_dir: removed with rmdir after the files). Returns the
 * slot, or -1 when the table is full (the temporary is then not removed on a signal). */
int sqz__temp_register(const char *path, int is_dir);
/* Forgets a slot; -1 is fine. */
void sqz__temp_unregister(int slot);
/* "PATH.sqztmp.PID.XXXXXX" (trailing slashes of PATH dropped), a mkstemp/mkdtemp template;
 * malloc'd, NULL on out of memory (error set). */
char *sqz__temp_template(const char *path);
/* Removes the temporaries beside `target` (in its directory) whose owner process no longer
 * exists: files, and staged directories with what they hold. Errors are ignored. */
void sqz__temp_sweep(const char *target);
/* Removes a file, or a directory and everything below it (symbolic links not followed). */
void sqz__remove_tree(const char *path);
/* Blocks the handled signals other than faults (around the renames that commit several
 * outputs); restore with the old mask. */
void sqz__temp_block_signals(sigset_t *old);
void sqz__temp_restore_signals(const sigset_t *old);

#endif
