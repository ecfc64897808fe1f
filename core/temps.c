/*
 * core/temps.c - the registry of live temporaries (what a signal handler removes), their
 * names (the owner's pid is in them), the sweep of stale ones a killed process left, and
 * the removal of a directory tree.
 *
 * Live temporaries are listed in a fixed table so that a signal handler can remove them
 * with async-signal-safe calls only (unlink, rmdir). The table is the one piece of
 * mutable global state in libsqz (with the deferred commits of core/outfile.c); it is
 * guarded by a mutex outside the handler.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/temps.h"
#include "sqz/io.h" /* sqz_io_cleanup_on_signals is public: its definition must see SQZ_API */

#define SQZ__MAX_TEMPS 64

typedef struct temp_slot {
    volatile sig_atomic_t used;
    volatile sig_atomic_t is_dir;
    char path[PATH_MAX];
} temp_slot;

static temp_slot g_temps[SQZ__MAX_TEMPS];
static pthread_mutex_t g_temps_lock = PTHREAD_MUTEX_INITIALIZER;

int sqz__temp_register(const char *path, int is_dir) {
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

void sqz__temp_unregister(int slot) {
    if (slot < 0) return;
    pthread_mutex_lock(&g_temps_lock);
    g_temps[slot].used = 0;
    pthread_mutex_unlock(&g_temps_lock);
}

/* ---- signals ----------------------------------------------------------------------- */

/* Every signal whose default action terminates the process and that can be caught. The
 * faults (SEGV, BUS: a mapped input truncated under us; ABRT: an assert) are included: the
 * previous handler (a sanitizer's) runs after ours. */
static const int g_signals[] = {SIGINT,  SIGTERM, SIGHUP,  SIGQUIT, SIGUSR1,   SIGUSR2, SIGALRM, SIGPIPE,
                                SIGXFSZ, SIGXCPU, SIGVTALRM, SIGPROF, SIGABRT, SIGBUS,  SIGSEGV, SIGFPE,
                                SIGILL,  SIGTRAP, SIGSYS};
#define SQZ__N_SIGNALS ((int)(sizeof g_signals / sizeof g_signals[0]))
static struct sigaction g_old[SQZ__N_SIGNALS];

static bool is_fault(int sig) { return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL; }

static void remove_temps(void) {
    /* Files first, then the directories that held them. */
    for (int pass = 0; pass < 2; pass++) {
        for (int i = SQZ__MAX_TEMPS - 1; i >= 0; i--) {
            if (!g_temps[i].used || g_temps[i].is_dir != pass) continue;
            if (pass == 0) unlink(g_temps[i].path);
            else rmdir(g_temps[i].path);
        }
    }
}

static void say(const char *s) { /* write(2) only: async-signal-safe */
    size_t n = 0;
    while (s[n]) n++;
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void cleanup_handler(int sig, siginfo_t *info, void *uctx) {
    (void)uctx;
    remove_temps();
    /* A fault on a mapped input: another process truncated the file under the mapping. Not a
     * bug of ours: one line naming the file, and the exit status of a failed run. */
    const char *mapped = sig == SIGBUS && info && info->si_code > 0 ? sqz__mapping_at(info->si_addr) : NULL;
    if (mapped) {
        say("sqz: error: ");
        say(mapped);
        say(": changed or truncated while being read (by another process): nothing written\n");
        _exit(1);
    }
    /* The previous disposition (the default, or a sanitizer's handler) takes the signal: a
     * fault recurs when the faulting instruction runs again; any other signal is raised
     * again and stays pending (blocked in this handler) until it returns. */
    for (int i = 0; i < SQZ__N_SIGNALS; i++)
        if (g_signals[i] == sig) sigaction(sig, &g_old[i], NULL);
    if (!is_fault(sig) || !info || info->si_code <= 0) raise(sig);
}

void sqz_io_cleanup_on_signals(void) {
    struct sigaction sa = {0};
    sa.sa_sigaction = cleanup_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < SQZ__N_SIGNALS; i++) sigaddset(&sa.sa_mask, g_signals[i]);
    for (int i = 0; i < SQZ__N_SIGNALS; i++) {
        if (sigaction(g_signals[i], NULL, &g_old[i]) != 0) continue;
        if (g_old[i].sa_handler == SIG_IGN) continue; /* nohup's SIGHUP, an ignored SIGPIPE: leave them */
        sigaction(g_signals[i], &sa, NULL);
    }
}

void sqz__temp_block_signals(sigset_t *old) {
    sigset_t set;
    sigemptyset(&set);
    for (int i = 0; i < SQZ__N_SIGNALS; i++)
        if (!is_fault(g_signals[i])) sigaddset(&set, g_signals[i]);
    pthread_sigmask(SIG_BLOCK, &set, old);
}

void sqz__temp_restore_signals(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }

/* ---- names and stale temporaries ----------------------------------------------------- */

char *sqz__temp_template(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;
    return sqz__asprintf("%.*s" SQZ__TEMP_TAG "%ld.XXXXXX", (int)n, path, (long)getpid());
}

/* The owner's pid in "NAME.sqztmp.PID.XXXXXX", or -1 when the name is not one of ours. */
static long temp_owner(const char *name) {
    const char *p = strstr(name, SQZ__TEMP_TAG);
    if (!p) return -1;
    p += strlen(SQZ__TEMP_TAG);
    char *end;
    errno = 0;
    long pid = strtol(p, &end, 10);
    if (errno || end == p || pid <= 0 || *end != '.' || strlen(end + 1) != 6) return -1;
    return pid;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    if (flag == FTW_DP) rmdir(path);
    else unlink(path);
    return 0;
}

void sqz__remove_tree(const char *path) {
    struct stat st;
    if (lstat(path, &st) != 0) return;
    if (!S_ISDIR(st.st_mode)) {
        unlink(path);
        return;
    }
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void sqz__temp_sweep(const char *target) {
    char *dir = sqz__dirname(target);
    DIR *d = dir ? opendir(dir) : NULL;
    const long self = (long)getpid();
    struct dirent *e;
    while (d && (e = readdir(d))) {
        const long pid = temp_owner(e->d_name);
        if (pid < 0 || pid == self || pid > INT_MAX) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* alive, or not ours to know */
        char *p = sqz__path_join(dir, e->d_name);
        if (p) sqz__remove_tree(p);
        free(p);
    }
    if (d) closedir(d);
    free(dir);
}
