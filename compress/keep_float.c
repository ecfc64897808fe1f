/*
 * compress/keep_float.c - `--keep-float LIST`, parsed once (the CLI parses it against the model
 * before any work and hands the items to the run, sqz_compress_opts.keep_parsed; a library caller
 * that gives only the list has the pipeline parse it once per run), and every stage matches tensors
 * against the result: a role ("attn_v": in every block), "blk.N" (every tensor of block N) or
 * "blk.N.ROLE". Against a model, an item that names no tensor of it is an error naming the item: a
 * typo must not keep nothing float in silence.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/compress_internal.h"

#define ITEM_GRAMMAR "is not a role (attn_v, ffn_down, ...), blk.N or blk.N.ROLE"

/* One item "ROLE", "blk.N" or "blk.N.ROLE" (len bytes at p). */
static sqz_status parse_item(const char *p, size_t len, int32_t *layer, sqz_role *role) {
    char item[64];
    SQZ_RETURN_IF(len == 0 || len >= sizeof item, SQZ_ERR_INVALID_ARG, "--keep-float: '%.*s' " ITEM_GRAMMAR,
                  (int)(len < 64 ? len : 64), p);
    memcpy(item, p, len);
    item[len] = 0;
    const char *r = item;
    *layer = -1;
    *role = SQZ_ROLE_COUNT;
    if (!strncmp(item, "blk.", 4)) {
        char *end;
        const long l = strtol(item + 4, &end, 10);
        SQZ_RETURN_IF(end == item + 4 || item[4] == '-' || item[4] == '+' || l > 1 << 20 || (*end && *end != '.'),
                      SQZ_ERR_INVALID_ARG, "--keep-float: '%s' " ITEM_GRAMMAR, item);
        *layer = (int32_t)l;
        if (!*end) return SQZ_OK;
        r = end + 1;
    }
    SQZ_RETURN_IF(!sqz_role_from_name(r, role), SQZ_ERR_INVALID_ARG, "--keep-float: '%s' " ITEM_GRAMMAR, item);
    return SQZ_OK;
}

/* Whether item i names a tensor of m. */
static bool names_a_tensor(const sqz_model *m, int32_t layer, sqz_role role) {
    for (int64_t t = 0; t < m->n_tensors; t++)
        if ((layer < 0 || m->tensors[t].layer == layer) && (role == SQZ_ROLE_COUNT || m->tensors[t].role == role))
            return true;
    return false;
}

sqz_status sqz_keep_float_parse(const char *list, const sqz_model *m, sqz_keep_float *out) {
    memset(out, 0, sizeof *out);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        SQZ_RETURN_IF(out->n >= SQZ_KEEP_FLOAT_MAX, SQZ_ERR_INVALID_ARG, "--keep-float: more than %d items",
                      SQZ_KEEP_FLOAT_MAX);
        int32_t layer = -1;
        sqz_role role = SQZ_ROLE_COUNT;
        SQZ_TRY(parse_item(p, len, &layer, &role));
        SQZ_RETURN_IF(m && !names_a_tensor(m, layer, role), SQZ_ERR_INVALID_ARG,
                      "--keep-float: '%.*s' names no tensor of the model (blocks 0..%lld)", (int)len, p,
                      (long long)m->hp.n_layers - 1);
        out->items[out->n].layer = layer;
        out->items[out->n].role = role;
        out->n++;
        p = e ? e + 1 : NULL;
    }
    return SQZ_OK;
}

bool sqz_keep_float_match(const sqz_keep_float *k, const sqz_tensor *t) {
    for (int i = 0; k && i < k->n; i++)
        if ((k->items[i].layer < 0 || k->items[i].layer == t->layer) &&
            (k->items[i].role == SQZ_ROLE_COUNT || k->items[i].role == t->role))
            return true;
    return false;
}
