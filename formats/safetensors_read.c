/* formats/safetensors_read.c - HF checkpoints: safetensors files (single or sharded),
 * config.json and tokenizer files.
 *
 * A safetensors file is: u64 little-endian header length N, N bytes of JSON
 *   {"__metadata__": {str: str}, "<name>": {"dtype": "F32", "shape": [..], "data_offsets": [b, e]}, ...}
 * (possibly padded with spaces), then the data section; offsets are relative to the data
 * section (https://github.com/huggingface/safetensors, "Format"). Every field is checked
 * before it is used; tensor data stays in the mapping and is not touched here. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "formats/formats_internal.h"

/* Integers in JSON are doubles: only values below 2^53 are exact. */
#define JSON_INT_MAX 9007199254740991.0
#define MAX_CONFIG_BYTES ((size_t)16 << 20)
#define MAX_SHARDS 65536

/* One tensor entry of a header. */
typedef struct st_entry {
    char *name;
    sqz_dtype dtype;
    int32_t ndim;
    int64_t shape[SQZ_MAX_DIMS];
    uint64_t begin, end;  /* byte range in the data section */
    const uint8_t *data;  /* into the mapping */
    const char *file;     /* the file's path (owned by st_set.files) */
} st_entry;

/* Everything read from the headers of all files, before names are mapped to roles. */
typedef struct st_set {
    st_entry *e;
    size_t n, cap;
    char **alias; /* __metadata__ string pairs: alias[2i] -> alias[2i+1] */
    size_t n_alias, cap_alias;
    char **files; /* the files' paths, as error messages name them */
    size_t n_files;
} st_set;

static void set_free(st_set *s) {
    for (size_t i = 0; i < s->n; i++) free(s->e[i].name);
    free(s->e);
    for (size_t i = 0; i < s->n_alias; i++) free(s->alias[i]);
    free(s->alias);
    for (size_t i = 0; i < s->n_files; i++) free(s->files[i]);
    free(s->files);
}

static bool is_json_space(uint8_t c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* A non-negative JSON integer below 2^53. */
static bool json_uint(const cJSON *it, uint64_t *out) {
    if (!cJSON_IsNumber(it)) return false;
    double d = it->valuedouble;
    if (!isfinite(d) || d < 0 || d > JSON_INT_MAX || d != floor(d)) return false;
    *out = (uint64_t)d;
    return true;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp((*(const st_entry *const *)a)->name, (*(const st_entry *const *)b)->name);
}
static int cmp_begin(const void *a, const void *b) {
    const st_entry *x = *(const st_entry *const *)a, *y = *(const st_entry *const *)b;
    return x->begin < y->begin ? -1 : x->begin > y->begin ? 1 : (x->end > y->end) - (x->end < y->end);
}

/* Reads one tensor entry (key `name`, value `v`) into e. */
static sqz_status parse_entry(const char *file, const char *name, const cJSON *v, uint64_t data_size,
                              st_entry *e) {
    SQZ_RETURN_IF(!cJSON_IsObject(v), SQZ_ERR_FORMAT, "%s: tensor '%s': entry is not a JSON object", file, name);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(v, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(v, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(v, "data_offsets");
    SQZ_RETURN_IF(!cJSON_IsString(dt), SQZ_ERR_FORMAT, "%s: tensor '%s': missing \"dtype\"", file, name);
    SQZ_RETURN_IF(!sqz_dtype_from_st(dt->valuestring, &e->dtype), SQZ_ERR_UNSUPPORTED,
                  "%s: tensor '%s': unknown or unsupported dtype \"%.32s\"", file, name, dt->valuestring);
    SQZ_RETURN_IF(!cJSON_IsArray(sh), SQZ_ERR_FORMAT, "%s: tensor '%s': missing \"shape\" array", file, name);
    int ndim = cJSON_GetArraySize(sh);
    SQZ_RETURN_IF(ndim > SQZ_MAX_DIMS, SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': %d dimensions (at most %d supported)",
                  file, name, ndim, SQZ_MAX_DIMS);
    int64_t n = 1;
    int i = 0;
    for (const cJSON *d = sh->child; d; d = d->next, i++) {
        uint64_t u;
        SQZ_RETURN_IF(!json_uint(d, &u), SQZ_ERR_FORMAT, "%s: tensor '%s': shape[%d] is not a non-negative integer",
                      file, name, i);
        e->shape[i] = (int64_t)u;
        SQZ_RETURN_IF(!sqz__mul_i64(n, (int64_t)u, &n), SQZ_ERR_FORMAT,
                      "%s: tensor '%s': the shape's element count overflows 64 bits", file, name);
    }
    /* A scalar (shape []) is one element; sqz tensors have at least one dimension. */
    e->ndim = ndim > 0 ? ndim : 1;
    for (int k = ndim; k < SQZ_MAX_DIMS; k++) e->shape[k] = 1;
    size_t nbytes;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(e->dtype, n, &nbytes), SQZ_ERR_FORMAT,
                  "%s: tensor '%s': %" PRId64 " elements of %s overflow the byte size", file, name, n,
                  sqz_dtype_name(e->dtype));
    SQZ_RETURN_IF(!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 || !json_uint(off->child, &e->begin) ||
                      !json_uint(off->child->next, &e->end),
                  SQZ_ERR_FORMAT, "%s: tensor '%s': \"data_offsets\" is not a pair of non-negative integers", file,
                  name);
    SQZ_RETURN_IF(e->begin > e->end, SQZ_ERR_FORMAT, "%s: tensor '%s': data offsets [%" PRIu64 ", %" PRIu64
                  ") are reversed", file, name, e->begin, e->end);
    SQZ_RETURN_IF(e->end > data_size, SQZ_ERR_FORMAT,
                  "%s: tensor '%s': data offsets [%" PRIu64 ", %" PRIu64 ") exceed the data section of %" PRIu64
                  " bytes", file, name, e->begin, e->end, data_size);
    SQZ_RETURN_IF(e->end - e->begin != nbytes, SQZ_ERR_FORMAT,
                  "%s: tensor '%s': data offsets [%" PRIu64 ", %" PRIu64 ") hold %" PRIu64 " bytes but shape x %s "
                  "needs %zu", file, name, e->begin, e->end, e->end - e->begin, sqz_dtype_name(e->dtype), nbytes);
    return SQZ_OK;
}

static sqz_status add_alias(st_set *s, const char *file, const cJSON *meta) {
    SQZ_RETURN_IF(!cJSON_IsObject(meta), SQZ_ERR_FORMAT, "%s: \"__metadata__\" is not a JSON object", file);
    for (const cJSON *kv = meta->child; kv; kv = kv->next) {
        if (!cJSON_IsString(kv) || !kv->string) continue; /* the spec says str -> str; be lenient */
        if (s->n_alias + 2 > s->cap_alias) {
            size_t cap = s->cap_alias ? s->cap_alias * 2 : 8;
            char **a = sqz__realloc(s->alias, cap * sizeof *a);
            if (!a) return SQZ_ERR_NOMEM;
            s->alias = a;
            s->cap_alias = cap;
        }
        char *k = sqz__strdup(kv->string), *v = sqz__strdup(kv->valuestring);
        if (!k || !v) { free(k); free(v); return SQZ_ERR_NOMEM; }
        s->alias[s->n_alias++] = k;
        s->alias[s->n_alias++] = v;
    }
    return SQZ_OK;
}

/* Checks a parsed header object and appends its tensors to s. */
static sqz_status parse_tensors(st_set *s, const char *file, const cJSON *root, const uint8_t *data,
                                uint64_t data_size) {
    size_t count = 0;
    for (const cJSON *it = root->child; it; it = it->next) count++;
    SQZ_RETURN_IF(count > SQZ__MAX_TENSORS || s->n + count > SQZ__MAX_TENSORS, SQZ_ERR_FORMAT,
                  "%s: %zu header entries, more than the %d tensors a checkpoint may have", file, count,
                  SQZ__MAX_TENSORS);
    if (s->n + count > s->cap) {
        st_entry *e = sqz__realloc(s->e, (s->n + count) * sizeof *e);
        if (!e) return SQZ_ERR_NOMEM;
        s->e = e;
        s->cap = s->n + count;
    }
    const size_t first = s->n;
    for (const cJSON *it = root->child; it; it = it->next) {
        const char *name = it->string ? it->string : "";
        SQZ_RETURN_IF(!sqz__utf8_valid(name, strlen(name)), SQZ_ERR_FORMAT,
                      "%s: a tensor name is not valid UTF-8 (header entry %zu)", file, s->n - first);
        if (strcmp(name, "__metadata__") == 0) {
            SQZ_TRY(add_alias(s, file, it));
            continue;
        }
        st_entry *e = &s->e[s->n];
        memset(e, 0, sizeof *e);
        SQZ_TRY(parse_entry(file, name, it, data_size, e));
        e->name = sqz__strdup(name);
        if (!e->name) return SQZ_ERR_NOMEM;
        e->data = data + e->begin;
        e->file = file;
        s->n++;
    }
    /* Overlapping byte ranges (within this file): sort by start. Empty tensors overlap nothing. */
    size_t n = s->n - first;
    if (n < 2) return SQZ_OK;
    st_entry **v = sqz__malloc(n * sizeof *v);
    if (!v) return SQZ_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) v[i] = &s->e[first + i];
    qsort(v, n, sizeof *v, cmp_begin);
    sqz_status st = SQZ_OK;
    const st_entry *prev = NULL;
    for (size_t i = 0; i < n && st == SQZ_OK; i++) {
        if (v[i]->begin == v[i]->end) continue;
        if (prev && v[i]->begin < prev->end)
            st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensors '%s' [%" PRIu64 ", %" PRIu64 ") and '%s' [%" PRIu64 ", %"
                           PRIu64 ") overlap", file, prev->name, prev->begin, prev->end, v[i]->name, v[i]->begin,
                           v[i]->end);
        prev = v[i];
    }
    free(v);
    return st;
}

/* Validates the framing of one mapped file and parses its header into s. */
static sqz_status parse_file(st_set *s, const sqz_mapping *map, const char *file) {
    SQZ_RETURN_IF(map->size < 8, SQZ_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file", file,
                  map->size);
    uint64_t hl = sqz__rd_u64(map->data);
    SQZ_RETURN_IF(hl > map->size - 8, SQZ_ERR_FORMAT, "%s: header length %" PRIu64 " exceeds the file size %zu",
                  file, hl, map->size);
    SQZ_RETURN_IF(hl > SQZ__MAX_JSON, SQZ_ERR_FORMAT, "%s: header length %" PRIu64 " is larger than %zu bytes",
                  file, hl, SQZ__MAX_JSON);
    const uint8_t *h = map->data + 8;
    size_t i = 0;
    while (i < hl && is_json_space(h[i])) i++;
    SQZ_RETURN_IF(i == hl || h[i] != '{', SQZ_ERR_FORMAT, "%s: the header does not start with a JSON object", file);
    /* cJSON needs no terminator with a length, but a private copy keeps it off the mapping's
     * tail and costs only the header. */
    char *text = sqz__malloc((size_t)hl + 1);
    if (!text) return SQZ_ERR_NOMEM;
    memcpy(text, h, (size_t)hl);
    text[hl] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, (size_t)hl, &end, false);
    sqz_status st = SQZ_OK;
    if (!root) {
        size_t at = end && end >= text ? (size_t)(end - text) : 0;
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: the header is not valid JSON (error near byte %zu)", file, at + 8);
    } else {
        for (size_t k = (size_t)(end - text); k < hl && st == SQZ_OK; k++) {
            if (!is_json_space((uint8_t)text[k]))
                st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: unexpected byte 0x%02x after the header's JSON object at byte "
                               "%zu", file, (uint8_t)text[k], k + 8);
        }
        if (st == SQZ_OK && !cJSON_IsObject(root))
            st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: the header is not a JSON object", file);
        if (st == SQZ_OK) st = parse_tensors(s, file, root, h + hl, (uint64_t)(map->size - 8 - hl));
    }
    cJSON_Delete(root);
    free(text);
    return st;
}

/* Rejects a name used twice (in one file or across shards). */
static sqz_status check_duplicates(const st_set *s) {
    if (s->n < 2) return SQZ_OK;
    const st_entry **v = sqz__malloc(s->n * sizeof *v);
    if (!v) return SQZ_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++) v[i] = &s->e[i];
    qsort(v, s->n, sizeof *v, cmp_name);
    sqz_status st = SQZ_OK;
    for (size_t i = 1; i < s->n && st == SQZ_OK; i++) {
        if (strcmp(v[i - 1]->name, v[i]->name) == 0)
            st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensor '%s' appears twice%s%s%s", v[i]->file, v[i]->name,
                           v[i - 1]->file != v[i]->file ? " (also in " : "",
                           v[i - 1]->file != v[i]->file ? v[i - 1]->file : "",
                           v[i - 1]->file != v[i]->file ? ")" : "");
    }
    free(v);
    return st;
}

/* Maps `path`, gives the mapping to the model, parses the header. */
static sqz_status open_file(st_set *s, sqz_model *m, const char *path) {
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    SQZ_TRY(sqz_model_keep_mapping(m, map));
    char **f = sqz__realloc(s->files, (s->n_files + 1) * sizeof *f);
    if (!f) return SQZ_ERR_NOMEM;
    s->files = f;
    char *display = sqz__strdup(path);
    if (!display) return SQZ_ERR_NOMEM;
    s->files[s->n_files++] = display;
    return parse_file(s, map, display);
}

/* ---- sharded checkpoints: model.safetensors.index.json ---- */

static bool plain_file_name(const char *s) {
    return *s && !strchr(s, '/') && !strchr(s, '\\') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

typedef struct wm_entry {
    const char *name, *file;
} wm_entry;

static int cmp_wm_name(const void *a, const void *b) {
    return strcmp(((const wm_entry *)a)->name, ((const wm_entry *)b)->name);
}
static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The index's weight_map as an array sorted by tensor name (for lookups), and its distinct
 * shard file names sorted (the order shards are opened in). */
static sqz_status read_weight_map(const char *iname, const cJSON *wm, wm_entry **map, size_t *n_map,
                                  const char ***shards, size_t *n_shards) {
    size_t n = 0;
    for (const cJSON *it = wm->child; it; it = it->next) {
        const char *name = it->string ? it->string : "";
        SQZ_RETURN_IF(n == SQZ__MAX_TENSORS, SQZ_ERR_FORMAT, "%s: \"weight_map\" lists more than %d tensors", iname,
                      SQZ__MAX_TENSORS);
        SQZ_RETURN_IF(!cJSON_IsString(it) || !plain_file_name(it->valuestring), SQZ_ERR_FORMAT,
                      "%s: tensor '%.200s' maps to something that is not a file name in the same directory", iname,
                      sqz__utf8_valid(name, strlen(name)) ? name : "?");
        n++;
    }
    SQZ_RETURN_IF(n == 0, SQZ_ERR_FORMAT, "%s: \"weight_map\" lists no tensors", iname);
    wm_entry *e = sqz__malloc(n * sizeof *e);
    const char **f = sqz__malloc(n * sizeof *f);
    if (!e || !f) { free(e); free(f); return SQZ_ERR_NOMEM; }
    size_t i = 0;
    for (const cJSON *it = wm->child; it; it = it->next, i++) {
        e[i] = (wm_entry){it->string ? it->string : "", it->valuestring};
        f[i] = it->valuestring;
    }
    qsort(e, n, sizeof *e, cmp_wm_name);
    for (i = 1; i < n; i++) {
        if (strcmp(e[i - 1].name, e[i].name) == 0) {
            const char *dup = sqz__utf8_valid(e[i].name, strlen(e[i].name)) ? e[i].name : "?";
            free(e);
            free(f);
            return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensor '%.200s' is listed twice in \"weight_map\"", iname, dup);
        }
    }
    qsort(f, n, sizeof *f, cmp_str);
    size_t u = 0;
    for (i = 0; i < n; i++) {
        if (u == 0 || strcmp(f[u - 1], f[i]) != 0) f[u++] = f[i];
    }
    if (u > MAX_SHARDS) {
        free(e);
        free(f);
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: %zu shards, more than %d", iname, u, MAX_SHARDS);
    }
    *map = e;
    *n_map = n;
    *shards = f;
    *n_shards = u;
    return SQZ_OK;
}

static sqz_status open_sharded(st_set *s, sqz_model *m, const char *dir, const char *index_path) {
    const char *iname = index_path;
    char *json;
    size_t len;
    SQZ_TRY(sqz_read_file(index_path, SQZ__MAX_JSON, &json, &len));
    cJSON *root = cJSON_ParseWithLength(json, len);
    free(json);
    SQZ_RETURN_IF(!root, SQZ_ERR_FORMAT, "%s: not valid JSON", iname);
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    wm_entry *map = NULL;
    const char **shards = NULL;
    size_t n_map = 0, n_shards = 0;
    sqz_status st = cJSON_IsObject(wm) ? read_weight_map(iname, wm, &map, &n_map, &shards, &n_shards)
                                       : SQZ_ERROR(SQZ_ERR_FORMAT, "%s: no \"weight_map\" object", iname);
    for (size_t k = 0; k < n_shards && st == SQZ_OK; k++) {
        char *p = sqz__path_join(dir, shards[k]);
        if (!p) { st = SQZ_ERR_NOMEM; break; }
        size_t before = s->n;
        st = open_file(s, m, p);
        free(p);
        /* Every tensor of a shard must be listed for that shard. */
        for (size_t i = before; i < s->n && st == SQZ_OK; i++) {
            wm_entry key = {s->e[i].name, NULL};
            const wm_entry *w = bsearch(&key, map, n_map, sizeof *map, cmp_wm_name);
            if (!w || strcmp(w->file, shards[k]) != 0)
                st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: tensor '%s' is not listed for this shard in %s", s->e[i].file,
                               s->e[i].name, iname);
        }
    }
    if (st == SQZ_OK) st = check_duplicates(s);
    if (st == SQZ_OK && n_map != s->n)
        st = SQZ_ERROR(SQZ_ERR_FORMAT, "%s: \"weight_map\" lists %zu tensors but the shards hold %zu", iname, n_map,
                       s->n);
    free(map);
    free(shards);
    cJSON_Delete(root);
    return st;
}

/* ---- from entries to the model ---- */

/* True if the __metadata__ pairs say the two names share storage. */
static bool aliased(const st_set *s, const char *a, const char *b) {
    for (size_t i = 0; i + 1 < s->n_alias; i += 2) {
        if ((strcmp(s->alias[i], a) == 0 && strcmp(s->alias[i + 1], b) == 0) ||
            (strcmp(s->alias[i], b) == 0 && strcmp(s->alias[i + 1], a) == 0))
            return true;
    }
    return false;
}

/* Adds t with its data at p (aligned copy when p is not aligned for the dtype). */
static sqz_status add_view(sqz_model *m, sqz_tensor *t, const uint8_t *p) {
    size_t align = sqz_dtype_info(t->dtype)->type_size;
    if (t->nbytes > 0 && align > 1 && align <= 8 && (uintptr_t)p % align != 0) {
        /* Writers align tensors (the spec pads the header to 8 bytes and sorts by alignment);
         * a file that does not gets an aligned copy so consumers may use typed pointers. */
        void *copy = sqz__malloc(t->nbytes);
        if (!copy) return SQZ_ERR_NOMEM;
        memcpy(copy, p, t->nbytes);
        t->data = copy;
        t->owned = true;
    } else {
        t->data = (void *)p;
    }
    if (!sqz_model_add_tensor(m, t)) {
        if (t->owned) free(t->data);
        return SQZ_ERR_NOMEM;
    }
    return SQZ_OK;
}

/* A fused projection (Phi-3's qkv_proj: q, k, v rows; gate_up_proj: gate, up rows) split into its
 * roles, each a view of its rows under the unfused name. */
static sqz_status add_fused(sqz_model *m, const st_entry *e, sqz__hf_name_kind k, int32_t layer, sqz_param param) {
    const sqz_layer_dims *ld = &m->layers[layer];
    const int64_t hd = m->hp.head_dim;
    const sqz_role qkv[] = {SQZ_ROLE_ATTN_Q, SQZ_ROLE_ATTN_K, SQZ_ROLE_ATTN_V}, gu[] = {SQZ_ROLE_FFN_GATE, SQZ_ROLE_FFN_UP};
    const int64_t qkv_rows[] = {ld->n_heads * hd, ld->n_kv_heads * hd, ld->n_kv_heads * hd}, gu_rows[] = {ld->d_ff, ld->d_ff};
    const bool is_qkv = k == SQZ__HF_FUSED_QKV;
    const int parts = is_qkv ? 3 : 2;
    const sqz_role *roles = is_qkv ? qkv : gu;
    const int64_t *rows = is_qkv ? qkv_rows : gu_rows;
    int64_t total = 0;
    for (int i = 0; i < parts; i++) total += rows[i];
    const int want_nd = param == SQZ_PARAM_WEIGHT ? 2 : 1;
    SQZ_RETURN_IF(e->ndim != want_nd || e->shape[0] != total || sqz_dtype_info(e->dtype)->block_size != 1,
                  SQZ_ERR_SHAPE, "%s: tensor '%s': a fused projection of %lld rows (%s) in %d dimensions, has %lld",
                  e->file, e->name, (long long)total, is_qkv ? "q, k, v" : "gate, up", want_nd,
                  (long long)(e->ndim > 0 ? e->shape[0] : 0));
    size_t row_bytes;
    SQZ_RETURN_IF(!sqz_dtype_nbytes(e->dtype, want_nd == 2 ? e->shape[1] : 1, &row_bytes), SQZ_ERR_SHAPE,
                  "%s: tensor '%s': row size overflows", e->file, e->name);
    int64_t r0 = 0;
    for (int i = 0; i < parts; i++) {
        char name[160];
        sqz__hf_name_make(m->hp.family, roles[i], layer, param, name, sizeof name);
        sqz_tensor t = {.name = name, .role = roles[i], .layer = layer, .param = param, .dtype = e->dtype,
                        .ndim = e->ndim};
        memcpy(t.shape, e->shape, sizeof t.shape);
        t.shape[0] = rows[i];
        t.nbytes = (size_t)rows[i] * row_bytes;
        SQZ_TRY(add_view(m, &t, e->data + (size_t)r0 * row_bytes));
        r0 += rows[i];
    }
    return SQZ_OK;
}

/* Gemma's RMSNorm weights w are applied as 1 + w: sqz keeps 1 + w (as llama.cpp's GGUF), in f32, computed
 * as transformers does (1.0 + w.float()). */
static sqz_status norms_plus_one(sqz_model *m) {
    for (int64_t i = 0; i < m->n_tensors; i++) {
        sqz_tensor *t = &m->tensors[i];
        if (!sqz__is_rms_norm_role(t->role) || t->param != SQZ_PARAM_WEIGHT) continue;
        const int64_t n = sqz_tensor_nelements(t);
        float *w = sqz__malloc((size_t)(n > 0 ? n : 1) * sizeof *w);
        if (!w) return SQZ_ERR_NOMEM;
        sqz_status st = sqz_tensor_to_f32(t, w);
        if (st != SQZ_OK) {
            free(w);
            return st;
        }
        for (int64_t j = 0; j < n; j++) w[j] = 1.0f + w[j];
        if (t->owned) free(t->data);
        t->data = w;
        t->owned = true;
        t->dtype = SQZ_DTYPE_F32;
        t->nbytes = (size_t)n * sizeof *w;
    }
    return SQZ_OK;
}

static sqz_status add_entry(sqz_model *m, const sqz__st_layout *L, const st_entry *e, bool has_embd,
                            const char *embd_name, int32_t *counts);

static sqz_status add_tensors(const st_set *s, sqz_model *m, const sqz__st_layout *L) {
    const sqz_family fam = m->hp.family;
    char embd_name[64], head_name[64];
    const sqz_family_info *fi = sqz_family_get(fam);
    const bool lm_head = fi && fi->lm_head; /* a classifier that may be tied to the embedding */
    if (lm_head) {
        sqz__hf_name_make(fam, SQZ_ROLE_TOKEN_EMBD, -1, SQZ_PARAM_WEIGHT, embd_name, sizeof embd_name);
        sqz__hf_name_make(fam, SQZ_ROLE_OUTPUT, -1, SQZ_PARAM_WEIGHT, head_name, sizeof head_name);
    }
    bool has_embd = false;
    for (size_t i = 0; i < s->n && lm_head; i++) has_embd |= strcmp(s->e[i].name, embd_name) == 0;
    /* safetensors' save_model drops one of two tensors that share storage and records
     * {"dropped": "kept"} in __metadata__: an alias between the embedding and the
     * classifier means tied embeddings whatever config.json says. */
    if (lm_head && aliased(s, embd_name, head_name)) m->hp.tied_embeddings = true;
    if (!lm_head) m->hp.tied_embeddings = false;

    int32_t *counts = sqz__calloc(s->n + (size_t)m->n_tensors + 1, sizeof *counts); /* experts per stacked tensor */
    if (!counts) return SQZ_ERR_NOMEM;
    sqz_status st = SQZ_OK;
    for (size_t i = 0; i < s->n && st == SQZ_OK; i++)
        st = add_entry(m, L, &s->e[i], has_embd, embd_name, counts);
    if (st == SQZ_OK) st = sqz__st_experts_check(m, counts, s->files[0]);
    free(counts);
    SQZ_TRY(st);
    return fi && fi->hf_norm_plus_one ? norms_plus_one(m) : SQZ_OK;
}

/* Entry e as the model's tensor: a view, the split rows of a fused projection, an expert's matrix copied
 * into its stacked tensor, or nothing (a derived buffer, a layout's part). */
static sqz_status add_entry(sqz_model *m, const sqz__st_layout *L, const st_entry *e, bool has_embd,
                            const char *embd_name, int32_t *counts) {
    if (L && L->is_part(e->name)) return SQZ_OK; /* the quantization layout's tensors: L->attach */
    sqz_tensor t;
    memset(&t, 0, sizeof t);
    int32_t x;
    const sqz__hf_name_kind k = sqz__hf_name_parse_expert(m->hp.family, e->name, &t.role, &t.layer, &t.param, &x);
    if (k == SQZ__HF_IGNORED) return SQZ_OK;
    if (k == SQZ__HF_EXPERT) {
        const sqz__st_view v = {e->name, e->dtype, e->ndim, e->shape, e->data, e->file};
        return sqz__st_add_expert(m, &v, t.role, t.layer, t.param, x, counts);
    }
    if ((k == SQZ__HF_FUSED_QKV || k == SQZ__HF_FUSED_GATE_UP) && t.layer < m->hp.n_layers)
        return add_fused(m, e, k, t.layer, t.param);
    SQZ_RETURN_IF(k != SQZ__HF_TENSOR, SQZ_ERR_FORMAT, "%s: tensor '%s': not a known %s tensor name", e->file,
                  e->name, m->hp.arch);
    const char *name = e->name;
    if (t.role == SQZ_ROLE_OUTPUT && t.param == SQZ_PARAM_WEIGHT && m->hp.tied_embeddings) {
        if (has_embd) return SQZ_OK; /* transformers ties lm_head to the embedding: the embedding wins */
        /* only the classifier was kept: it is the embedding */
        t.role = SQZ_ROLE_TOKEN_EMBD;
        name = embd_name;
    }
    t.dtype = e->dtype;
    t.ndim = e->ndim;
    memcpy(t.shape, e->shape, sizeof t.shape);
    t.nbytes = (size_t)(e->end - e->begin);
    t.name = (char *)name;
    return add_view(m, &t, e->data);
}

/* The quantized weights of layout L (st_layout.c's rows) from their tensors. */
static sqz_status attach_layout(const st_set *s, sqz_model *m, const sqz__st_layout *L, const void *qc) {
    sqz__st_view *v = sqz__calloc(s->n ? s->n : 1, sizeof *v);
    if (!v) return SQZ_ERR_NOMEM;
    for (size_t i = 0; i < s->n; i++)
        v[i] = (sqz__st_view){s->e[i].name, s->e[i].dtype, s->e[i].ndim, s->e[i].shape, s->e[i].data, s->e[i].file};
    sqz_status st = L->attach(m, qc, v, s->n);
    free(v);
    return st;
}

sqz_status sqz__hf_tokenizer_read(const char *dir, sqz_model *m) {
    char *tpath = sqz__path_join(dir, "tokenizer.json");
    char *cpath = sqz__path_join(dir, "tokenizer_config.json");
    char *tjson = NULL, *cjson = NULL;
    size_t tlen = 0;
    sqz_status st = tpath && cpath ? SQZ_OK : SQZ_ERR_NOMEM;
    if (st == SQZ_OK && sqz__is_file(tpath)) {
        st = sqz_read_file(tpath, SQZ__MAX_JSON, &tjson, &tlen);
        if (st == SQZ_OK && sqz__is_file(cpath)) st = sqz_read_file(cpath, MAX_CONFIG_BYTES, &cjson, NULL);
        if (st == SQZ_OK) {
            /* config.json's special ids are the fallback when the tokenizer files name none */
            int32_t bos = m->vocab.bos, eos = m->vocab.eos, pad = m->vocab.pad;
            st = sqz__tokenizer_json_read(tjson, tlen, cjson, tpath, &m->vocab);
            if (st == SQZ_ERR_UNSUPPORTED) {
                /* no tokenizer reader for this file yet: go on with an empty vocabulary */
                sqz_vocab_clear(&m->vocab);
                sqz_clear_error();
                st = SQZ_OK;
            }
            if (m->vocab.bos < 0) m->vocab.bos = bos;
            if (m->vocab.eos < 0) m->vocab.eos = eos;
            if (m->vocab.pad < 0) m->vocab.pad = pad;
        }
    }
    free(tjson);
    free(cjson);
    free(tpath);
    free(cpath);
    return st;
}

static sqz_status open_checkpoint(const char *path, sqz_model *m, st_set *s) {
    char *dir = NULL, *cfg_path = NULL, *single = NULL, *index = NULL, *cfg = NULL;
    sqz_status st = SQZ_OK;
    bool is_dir = sqz__is_dir(path);
    dir = is_dir ? sqz__strdup(path) : sqz__dirname(path);
    if (!dir) return SQZ_ERR_NOMEM;
    for (size_t n = strlen(dir); n > 1 && dir[n - 1] == '/'; n--) dir[n - 1] = 0;
    cfg_path = sqz__path_join(dir, "config.json");
    if (!cfg_path) { st = SQZ_ERR_NOMEM; goto done; }

    if (!is_dir) {
        st = open_file(s, m, path);
        if (st == SQZ_OK) st = check_duplicates(s);
    } else {
        single = sqz__path_join(dir, "model.safetensors");
        index = sqz__path_join(dir, "model.safetensors.index.json");
        if (!single || !index) { st = SQZ_ERR_NOMEM; goto done; }
        /* transformers looks for the single file first, then the index */
        if (sqz__is_file(single)) {
            st = open_file(s, m, single);
            if (st == SQZ_OK) st = check_duplicates(s);
        } else if (sqz__is_file(index)) {
            st = open_sharded(s, m, dir, index);
        } else {
            st = SQZ_ERROR(SQZ_ERR_NOT_FOUND, "%s: neither model.safetensors nor model.safetensors.index.json",
                           path);
        }
    }
    if (st != SQZ_OK) goto done;

    if (!sqz__is_file(cfg_path)) {
        st = SQZ_ERROR(SQZ_ERR_NOT_FOUND, "%s: no config.json beside it; the attention head count (and the norm and "
                       "rotary settings) cannot be inferred from tensor shapes alone", path);
        goto done;
    }
    size_t len;
    st = sqz_read_file(cfg_path, MAX_CONFIG_BYTES, &cfg, &len);
    if (st == SQZ_OK) st = sqz__hf_config_read(cfg, len, cfg_path, m);
    const sqz__st_layout *L = NULL;
    void *qc = NULL;
    if (st == SQZ_OK) st = sqz__st_layout_detect(cfg, len, cfg_path, &L, &qc);
    if (st == SQZ_OK) st = add_tensors(s, m, L);
    if (st == SQZ_OK && L) st = attach_layout(s, m, L, qc);
    for (int64_t i = 0; st == SQZ_OK && i < m->n_tensors; i++) /* FP8 values mean something only with their scale */
        if (m->tensors[i].dtype == SQZ_DTYPE_F8_E4M3 && !m->tensors[i].qp)
            st = SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: tensor '%s': FP8 E4M3 values without a scale sqz reads (sqz reads "
                           "compressed-tensors' float-quantized weight_scale)", cfg_path, m->tensors[i].name);
    sqz__st_layout_config_free(qc);
    if (st == SQZ_OK) st = sqz__hf_tokenizer_read(dir, m);
    if (st == SQZ_OK && !m->name) {
        m->name = sqz__strdup(sqz__basename(is_dir ? dir : path));
        if (!m->name) st = SQZ_ERR_NOMEM;
    }
done:
    free(cfg);
    free(single);
    free(index);
    free(cfg_path);
    free(dir);
    return st;
}

sqz_status sqz__st_open(const char *path, sqz_model *m) {
    st_set s;
    memset(&s, 0, sizeof s);
    sqz_status st = open_checkpoint(path, m, &s);
    set_free(&s);
    return st;
}
