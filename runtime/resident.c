/*
 * runtime/resident.c - a session's copies of the weights it multiplies, in transparent huge pages.
 *
 * Products on stored weights read every weight once per token: the 1.5 B's gigabyte per step of
 * generation. Read from the file's mapping, that is one 4 KB page (one TLB miss, one page walk)
 * per 4 KB; the page cache of an ext4 file has no huge pages here (MADV_COLLAPSE: EINVAL). The
 * same bytes copied into anonymous memory advised MADV_HUGEPAGE take one TLB entry per 2 MB:
 * Qwen2.5-Coder-1.5B Q4_K_M, 2 threads, generation 26.3-27.0 -> 29.4-31.9 tokens/s (12-06, EPYC;
 * llama.cpp's repacked weights are anonymous memory too).
 *
 * A tensor is copied on its first product of at most 16 tokens (generation's steps, a short
 * prompt), when it holds at least 2 MB (a smaller one cannot fill a huge page) and its bytes lie
 * in a file mapping (data a pass wrote to the heap is used as it is). The mapping's pages of the
 * copied range are then dropped from this process (they would otherwise count twice in its
 * resident memory): a later read of the tensor through the model faults them in again from the
 * file. Products of many tokens (eval's windows) read each weight once per tile of tokens: the
 * TLB is not their cost, and the copy's first touch of fresh memory is (a fresh gigabyte of huge
 * pages took 0.1-3.4 s to fault in on this VM), so they multiply from the mapping. sqz_session_invalidate forgets a layer's copies, as it
 * forgets its float copies. sqz_session_opts.map_weights = true turns the copies off.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "runtime/runtime_internal.h"

enum { SQZ__HUGE = 2 << 20, SQZ__RESIDENT_MAX_M = 16 };

/* n bytes (rounded up to 4 KB) of anonymous memory at a 2 MB boundary, advised MADV_HUGEPAGE
 * before anything touches it; NULL when the system has none to give. */
static void *huge_alloc(size_t n, size_t *len) {
    const size_t L = (n + 4095) & ~(size_t)4095;
    uint8_t *p = mmap(NULL, L + SQZ__HUGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    const uintptr_t a = ((uintptr_t)p + SQZ__HUGE - 1) & ~(uintptr_t)(SQZ__HUGE - 1);
    if (a > (uintptr_t)p) munmap(p, a - (uintptr_t)p);
    const size_t tail = (size_t)((uintptr_t)p + L + SQZ__HUGE - (a + L));
    if (tail) munmap((void *)(a + L), tail);
#ifdef MADV_HUGEPAGE
    (void)madvise((void *)a, L, MADV_HUGEPAGE);
#endif
    *len = L;
    return (void *)a;
}

const void *sqz__resident(sqz_session *s, const sqz_tensor *t, int64_t m) {
    const int64_t i = sqz__tensor_index(s, t);
    if (!s->wres || i < 0 || i >= s->n_wcache) return t->data;
    sqz__resident_copy *r = &s->wres[i];
    if (r->p) return r->p;
    if (m > SQZ__RESIDENT_MAX_M) return t->data; /* many tokens: the weights' reads are not the cost */
    if (r->skip || t->nbytes < SQZ__HUGE || !sqz__mapping_at(t->data)) {
        r->skip = true;
        return t->data;
    }
    size_t len;
    void *p = huge_alloc(t->nbytes, &len);
    if (!p) { /* no memory for the copy: the mapping serves */
        r->skip = true;
        return t->data;
    }
    memcpy(p, t->data, t->nbytes);
    sqz__mapping_release(t->data, t->nbytes);
    r->p = p;
    r->len = len;
    s->wres_bytes += (int64_t)len;
    return p;
}

static void drop(sqz_session *s, int64_t i) {
    sqz__resident_copy *r = &s->wres[i];
    if (r->p) {
        munmap(r->p, r->len);
        s->wres_bytes -= (int64_t)r->len;
    }
    *r = (sqz__resident_copy){0};
}

void sqz__resident_invalidate(sqz_session *s, int32_t layer) {
    for (int64_t i = 0; s->wres && i < s->n_wcache && i < s->m->n_tensors; i++)
        if (layer == -2 || s->m->tensors[i].layer == layer) drop(s, i);
}

void sqz__resident_free(sqz_session *s) {
    for (int64_t i = 0; s->wres && i < s->n_wcache; i++) drop(s, i);
    free(s->wres);
    s->wres = NULL;
}
