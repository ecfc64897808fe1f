/*
 * calib/imatrix_read.c - reading an importance matrix written by llama.cpp's llama-imatrix
 * (`sqz compress --imatrix FILE`), in both of its layouts (llama.cpp tools/imatrix/imatrix.cpp,
 * common/imatrix-loader.cpp), and turning it into the E[x^2] statistics that sqz's own
 * calibration gives the imatrix method.
 *
 *   GGUF (what llama-imatrix writes by default): a GGUF v2/v3 file with general.type =
 *     "imatrix", the keys imatrix.datasets (string array), imatrix.chunk_count and
 *     imatrix.chunk_size (u32), and per weight NAME two F32 tensors: NAME.in_sum2, shape
 *     (n_in, n_mat) = the sums of x^2 over the tokens, and NAME.counts, shape (1, n_mat) = the
 *     tokens. llama-quantize's value is in_sum2 / (float)lround(count), or 1 where count is 0.
 *   legacy .dat (--output-format dat): i32 n_entries; per entry i32 len, the name, i32 ncall,
 *     i32 nval, nval f32 (already mean x^2 times ncall); then optionally i32 chunks, i32 len and
 *     the dataset name. llama-quantize's value is v / (float)ncall (v itself when ncall <= 0).
 *
 * Both are read from memory with bounds-checked little-endian reads; every count is checked
 * against the bytes left before anything is allocated; values must be finite and >= 0
 * (llama-quantize refuses non-finite ones too). Names are llama.cpp's GGUF tensor names:
 * blk.N.ROLE.weight (ROLE a GGUF base name of sqz's role table) and output.weight (collected
 * with llama-imatrix --process-output; block -1 here).
 */
#include <stdlib.h>
#include <string.h>

#include "calib/calib_internal.h"

#define FAIL(...) (sqz__error(SQZ_ERR_FORMAT, __FILE__, __LINE__, __VA_ARGS__))
#define MAX_ENTRIES (1 << 14) /* a 70B model's imatrix has about 560 */
#define MAX_NAME 256
#define MAX_VALUES ((int64_t)SQZ_CALIB_MAX_N_IN * 4096) /* n_in times up to 4096 experts (checked against the
                                                         file's bytes first) */

void sqz__imatrix_free(sqz__imatrix *im) {
    if (!im) return;
    for (int64_t i = 0; i < im->n; i++) {
        free(im->e[i].v);
        free(im->e[i].counts);
    }
    free(im->e);
    memset(im, 0, sizeof *im);
}

static sqz_status add_entry(const char *path, sqz__imatrix *im, const char *name, size_t len, int64_t n) {
    if (len == 0 || len >= MAX_NAME) return FAIL("%s: entry %lld: name of %zu bytes", path, (long long)im->n, len);
    if (n < 1 || n > MAX_VALUES) return FAIL("%s: '%.*s': %lld values", path, (int)len, name, (long long)n);
    for (int64_t i = 0; i < im->n; i++)
        if (strlen(im->e[i].name) == len && !memcmp(im->e[i].name, name, len))
            return FAIL("%s: '%.*s' appears twice", path, (int)len, name);
    if (im->n % 64 == 0) {
        sqz__imatrix_entry *e = sqz__realloc(im->e, (size_t)(im->n + 64) * sizeof *e);
        if (!e) return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for %lld entries", path, (long long)im->n + 64);
        im->e = e;
    }
    sqz__imatrix_entry *e = &im->e[im->n];
    memset(e, 0, sizeof *e);
    memcpy(e->name, name, len);
    e->v = sqz__malloc((size_t)n * sizeof(float));
    if (!e->v) return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for %lld values of '%s'", path, (long long)n, e->name);
    e->n = n;
    im->n++;
    return SQZ_OK;
}

static sqz_status check_values(const char *path, const sqz__imatrix_entry *e) {
    for (int64_t j = 0; j < e->n; j++)
        if (!(e->v[j] >= 0.0f) || !isfinite(e->v[j]))
            return FAIL("%s: '%s': value %lld is %g (an importance is a finite mean of x^2)", path, e->name,
                        (long long)j, (double)e->v[j]);
    return SQZ_OK;
}

/* ---- legacy .dat -------------------------------------------------------------------------- */

static sqz_status parse_dat(const char *path, const uint8_t *p, size_t size, sqz__imatrix *im) {
    sqz__reader r;
    sqz__reader_init(&r, p, size);
    const int32_t n_entries = (int32_t)sqz__reader_u32(&r);
    if (!r.ok || n_entries < 1) return FAIL("%s: not an importance matrix (no GGUF header, %d legacy entries)", path,
                                            (int)n_entries);
    /* an entry takes at least 16 bytes: a 4-byte file cannot announce 2^31 of them */
    if ((uint64_t)n_entries > sqz__reader_left(&r) / 16 || n_entries > MAX_ENTRIES)
        return FAIL("%s: %d entries do not fit in %zu bytes", path, (int)n_entries, size);
    for (int32_t i = 0; i < n_entries; i++) {
        const int32_t len = (int32_t)sqz__reader_u32(&r);
        const uint8_t *name = len > 0 && len < MAX_NAME ? sqz__reader_bytes(&r, (size_t)len) : NULL;
        const int32_t ncall = (int32_t)sqz__reader_u32(&r);
        const int32_t nval = (int32_t)sqz__reader_u32(&r);
        if (!r.ok || !name) return FAIL("%s: entry %d: truncated or a name of %d bytes", path, (int)i, (int)len);
        for (int32_t j = 0; j < len; j++)
            if (name[j] < 0x21 || name[j] > 0x7e)
                return FAIL("%s: entry %d: its name is not a tensor name (not an importance matrix of llama-imatrix: "
                            "neither GGUF nor its legacy .dat)", path, (int)i);
        if (nval < 1 || (uint64_t)nval > sqz__reader_left(&r) / 4)
            return FAIL("%s: '%.*s': %d values, %zu bytes left", path, (int)len, (const char *)name, (int)nval,
                        sqz__reader_left(&r));
        SQZ_TRY(add_entry(path, im, (const char *)name, (size_t)len, nval));
        sqz__imatrix_entry *e = &im->e[im->n - 1];
        const uint8_t *v = sqz__reader_bytes(&r, (size_t)nval * 4);
        for (int32_t j = 0; j < nval; j++) {
            const float x = sqz__rd_f32(v + 4 * j);
            e->v[j] = ncall > 0 ? x / (float)ncall : x;
        }
        SQZ_TRY(check_values(path, e));
    }
    /* the trailer (chunks, dataset name) is optional and only informative */
    if (sqz__reader_left(&r) >= 4) im->chunks = (int32_t)sqz__reader_u32(&r);
    im->legacy = true;
    return SQZ_OK;
}

/* ---- GGUF --------------------------------------------------------------------------------- */

enum { G_U8, G_I8, G_U16, G_I16, G_U32, G_I32, G_F32, G_BOOL, G_STRING, G_ARRAY, G_U64, G_I64, G_F64, G_NTYPES };
static const uint8_t g_size[G_NTYPES] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

typedef struct gstr {
    const uint8_t *p;
    uint64_t n;
} gstr;

static bool rd_str(sqz__reader *r, gstr *s) {
    s->n = sqz__reader_u64(r);
    if (!r->ok || s->n > sqz__reader_left(r)) return r->ok = false;
    s->p = sqz__reader_bytes(r, (size_t)s->n);
    return r->ok;
}

static bool str_is(const gstr *s, const char *z) { return s->n == strlen(z) && !memcmp(s->p, z, s->n); }

/* Skips one value of type t (arrays of scalars or strings; no nested arrays). */
static bool skip_value(sqz__reader *r, uint32_t t, uint64_t *arr_n, uint32_t *arr_t) {
    if (t >= G_NTYPES) return r->ok = false;
    gstr s;
    if (t == G_STRING) return rd_str(r, &s);
    if (t != G_ARRAY) return sqz__reader_bytes(r, g_size[t]) != NULL;
    const uint32_t et = sqz__reader_u32(r);
    const uint64_t n = sqz__reader_u64(r);
    if (!r->ok || et >= G_NTYPES || et == G_ARRAY) return r->ok = false;
    *arr_n = n;
    *arr_t = et;
    if (et == G_STRING) {
        if (n > sqz__reader_left(r) / 8) return r->ok = false;
        for (uint64_t i = 0; i < n && r->ok; i++) rd_str(r, &s);
        return r->ok;
    }
    if (n > sqz__reader_left(r) / g_size[et]) return r->ok = false;
    return sqz__reader_bytes(r, (size_t)(n * g_size[et])) != NULL;
}

typedef struct gtensor {
    gstr name;
    uint64_t ne0, ne1, offset;
} gtensor;

static sqz_status parse_kvs(const char *path, sqz__reader *r, uint64_t n_kv, sqz__imatrix *im, uint64_t *align) {
    bool is_imatrix = false, have_chunks = false, have_size = false, have_sets = false;
    for (uint64_t i = 0; i < n_kv; i++) {
        gstr key;
        rd_str(r, &key);
        const size_t at = r->pos;
        const uint32_t t = sqz__reader_u32(r);
        uint64_t an = 0;
        uint32_t at_t = 0;
        if (!r->ok || !skip_value(r, t, &an, &at_t))
            return FAIL("%s: metadata key %llu: truncated or of an unknown type", path, (unsigned long long)i);
        const uint8_t *v = r->p + at + 4;
        if (str_is(&key, "general.type")) is_imatrix = t == G_STRING && r->pos - at - 12 == 7 && !memcmp(v + 8, "imatrix", 7);
        else if (str_is(&key, "imatrix.chunk_count") && t == G_U32) im->chunks = (int32_t)sqz__rd_u32(v), have_chunks = true;
        else if (str_is(&key, "imatrix.chunk_size") && t == G_U32) im->chunk_size = (int32_t)sqz__rd_u32(v), have_size = true;
        else if (str_is(&key, "imatrix.datasets") && t == G_ARRAY && at_t == G_STRING) have_sets = true;
        else if (str_is(&key, "general.alignment") && t == G_U32) *align = sqz__rd_u32(v);
    }
    if (*align == 0 || (*align & (*align - 1)) || *align > 65536)
        return FAIL("%s: general.alignment %llu is not a power of two up to 65536", path, (unsigned long long)*align);
    /* llama-quantize refuses a GGUF imatrix without its metadata ("missing imatrix metadata") */
    if (!have_chunks || !have_size || !have_sets)
        return FAIL("%s: %s", path, is_imatrix ? "missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, "
                                                 "imatrix.chunk_size)"
                                               : "a GGUF file but not an importance matrix (general.type is not "
                                                 "'imatrix'): give the file llama-imatrix wrote");
    return SQZ_OK;
}

static bool has_suffix(const gstr *s, const char *suf, uint64_t *stem) {
    const size_t k = strlen(suf);
    if (s->n <= k || memcmp(s->p + s->n - k, suf, k)) return false;
    *stem = s->n - k;
    return true;
}

/* The values of weight `stem` (the first stem bytes of sum's name) from its in_sum2 and counts
 * tensors; data is the file's tensor data (data_size bytes). */
static sqz_status gguf_entry(const char *path, sqz__imatrix *im, const gtensor *sum, const gtensor *cnt,
                             const uint8_t *data, size_t data_size, uint64_t stem) {
    const char *nm = (const char *)sum->name.p;
    if (!cnt) return FAIL("%s: '%.*s': in_sum2 without counts", path, (int)stem, nm);
    if (cnt->ne0 != 1 || cnt->ne1 != sum->ne1)
        return FAIL("%s: '%.*s': counts of shape (%llu, %llu) for %llu matrices", path, (int)stem, nm,
                    (unsigned long long)cnt->ne0, (unsigned long long)cnt->ne1, (unsigned long long)sum->ne1);
    const uint64_t n = sum->ne0 * sum->ne1; /* both checked against the data size below */
    if (sum->offset > data_size || n > (data_size - sum->offset) / 4 || cnt->offset > data_size ||
        cnt->ne1 > (data_size - cnt->offset) / 4)
        return FAIL("%s: '%.*s': tensor data runs past the end of the file", path, (int)stem, nm);
    SQZ_TRY(add_entry(path, im, nm, (size_t)stem, (int64_t)n));
    sqz__imatrix_entry *e = &im->e[im->n - 1];
    e->n_mat = (int64_t)sum->ne1;
    e->counts = sqz__malloc((size_t)sum->ne1 * sizeof(float));
    if (!e->counts) return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for the counts of '%s'", path, e->name);
    for (uint64_t m = 0; m < sum->ne1; m++) {
        const float c = sqz__rd_f32(data + cnt->offset + 4 * m);
        if (!isfinite(c) || c < 0 || c > 9.0e15f)
            return FAIL("%s: '%s': count %g of matrix %llu", path, e->name, (double)c, (unsigned long long)m);
        const float count = (float)llroundf(c);
        e->counts[m] = count;
        for (uint64_t j = 0; j < sum->ne0; j++) {
            const float s = sqz__rd_f32(data + sum->offset + 4 * (m * sum->ne0 + j));
            e->v[m * sum->ne0 + j] = count > 0.0f ? s / count : 1.0f;
        }
    }
    return check_values(path, e);
}

static sqz_status parse_gguf(const char *path, const uint8_t *p, size_t size, sqz__imatrix *im) {
    sqz__reader r;
    sqz__reader_init(&r, p + 4, size - 4);
    const uint32_t version = sqz__reader_u32(&r);
    const uint64_t n_t = sqz__reader_u64(&r), n_kv = sqz__reader_u64(&r);
    if (!r.ok || version < 2 || version > 3) return FAIL("%s: GGUF version %u (2 and 3 are read)", path, version);
    /* a key takes at least 12 bytes, a tensor's description at least 24 */
    if (n_kv > sqz__reader_left(&r) / 12 || n_t > sqz__reader_left(&r) / 24 || n_t > MAX_ENTRIES)
        return FAIL("%s: %llu keys and %llu tensors do not fit in %zu bytes", path, (unsigned long long)n_kv,
                    (unsigned long long)n_t, size);
    uint64_t align = 32;
    SQZ_TRY(parse_kvs(path, &r, n_kv, im, &align));
    gtensor *ts = sqz__calloc((size_t)(n_t ? n_t : 1), sizeof *ts);
    if (!ts) return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for %llu tensors", path, (unsigned long long)n_t);
    sqz_status st = SQZ_OK;
    for (uint64_t i = 0; i < n_t && st == SQZ_OK; i++) {
        rd_str(&r, &ts[i].name);
        uint32_t nd = sqz__reader_u32(&r);
        ts[i].ne0 = ts[i].ne1 = 1;
        for (uint32_t d = 0; d < nd && d < 4 && r.ok; d++) {
            const uint64_t ne = sqz__reader_u64(&r);
            if (d == 0) ts[i].ne0 = ne;
            else if (d == 1) ts[i].ne1 = ne;
            else if (ne != 1) nd = 0; /* a third dimension: refused below */
        }
        const uint32_t type = sqz__reader_u32(&r);
        ts[i].offset = sqz__reader_u64(&r);
        if (!r.ok || ts[i].name.n == 0 || ts[i].name.n >= MAX_NAME)
            st = FAIL("%s: tensor %llu: truncated description", path, (unsigned long long)i);
        else if (nd < 1 || nd > 2 || type != 0 || ts[i].ne0 < 1 || ts[i].ne1 < 1 || ts[i].ne0 > SQZ_CALIB_MAX_N_IN ||
                 ts[i].ne1 > 4096 || ts[i].offset % align)
            st = FAIL("%s: tensor '%.*s': %u dimensions of type %u at offset %llu (an imatrix holds 1- or 2-D F32 "
                      "tensors)", path, (int)ts[i].name.n, (const char *)ts[i].name.p, nd, type,
                      (unsigned long long)ts[i].offset);
    }
    const size_t data_at = (r.pos + 4 + (size_t)align - 1) / (size_t)align * (size_t)align;
    if (st == SQZ_OK && data_at > size) st = FAIL("%s: no tensor data after the header", path);
    for (uint64_t i = 0; i < n_t && st == SQZ_OK; i++) {
        uint64_t stem = 0;
        if (!has_suffix(&ts[i].name, ".in_sum2", &stem)) {
            uint64_t s2;
            if (!has_suffix(&ts[i].name, ".counts", &s2))
                st = FAIL("%s: tensor '%.*s' is neither NAME.in_sum2 nor NAME.counts", path, (int)ts[i].name.n,
                          (const char *)ts[i].name.p);
            continue;
        }
        const gtensor *cnt = NULL; /* llama-imatrix writes it right after in_sum2 */
        for (uint64_t k = i + 1 < n_t ? i + 1 : 0, tries = 0; tries < n_t && !cnt; k = (k + 1) % n_t, tries++) {
            uint64_t s2;
            if (has_suffix(&ts[k].name, ".counts", &s2) && s2 == stem && !memcmp(ts[k].name.p, ts[i].name.p, stem))
                cnt = &ts[k];
        }
        st = gguf_entry(path, im, &ts[i], cnt, p + data_at, size - data_at, stem);
    }
    free(ts);
    if (st == SQZ_OK && im->n == 0) st = FAIL("%s: an importance matrix without entries", path);
    return st;
}

sqz_status sqz__imatrix_parse(const char *path, const uint8_t *data, size_t size, sqz__imatrix *out) {
    memset(out, 0, sizeof *out);
    sqz_status st = size >= 4 && !memcmp(data, "GGUF", 4) ? parse_gguf(path, data, size, out)
                                                           : parse_dat(path, data, size, out);
    if (st != SQZ_OK) sqz__imatrix_free(out);
    return st;
}

/* ---- onto the model ----------------------------------------------------------------------- */

/* blk.N.ROLE.weight -> (N, ROLE); output.weight -> (-1, OUTPUT). */
static bool parse_name(const char *name, int32_t *layer, sqz_role *role) {
    if (!strcmp(name, "output.weight")) {
        *layer = -1;
        *role = SQZ_ROLE_OUTPUT;
        return true;
    }
    if (strncmp(name, "blk.", 4)) return false;
    const char *p = name + 4;
    int64_t l = 0;
    int digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 7; p++, digits++) l = l * 10 + (*p - '0');
    const size_t n = strlen(p), k = strlen(".weight");
    if (!digits || (digits > 1 && name[4] == '0') || *p != '.' || n <= k + 1 || strcmp(p + n - k, ".weight"))
        return false; /* llama.cpp writes blk.0, never blk.00 */
    char r[64];
    if (n - k - 1 >= sizeof r) return false;
    memcpy(r, p + 1, n - k - 1);
    r[n - k - 1] = 0;
    *layer = (int32_t)l;
    return sqz_role_from_name(r, role);
}

/* Entry e as the input of `role`, of n_in columns (a mixture's experts: e->n / n_in matrices one after another). */
static sqz_status add_input(const char *path, sqz_calib_block *b, const sqz__imatrix_entry *e, sqz_role role,
                            int64_t n_tokens, int64_t n_in) {
    const int64_t n_mat = e->n / n_in;
    if (sqz_calib_block_input(b, role)) return FAIL("%s: '%s' appears twice", path, e->name);
    for (int i = 0; i < b->n_inputs; i++) /* q/k/v, gate/up read one input: llama-imatrix sums it alike */
        if (b->in[i].st.n_in == n_in && (b->in[i].n_mat ? b->in[i].n_mat : 1) == n_mat &&
            !memcmp(b->in[i].x2, e->v, (size_t)e->n * sizeof(float))) {
            b->in[i].roles |= SQZ__ROLE_BIT(role);
            return SQZ_OK;
        }
    if (b->n_inputs >= SQZ_CALIB_MAX_INPUTS)
        return FAIL("%s: '%s': block %d has more than %d distinct inputs", path, e->name, (int)b->layer,
                    SQZ_CALIB_MAX_INPUTS);
    sqz_calib_input *in = &b->in[b->n_inputs];
    in->x2 = sqz__malloc((size_t)e->n * sizeof(float));
    if (!in->x2) return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for '%s'", path, e->name);
    memcpy(in->x2, e->v, (size_t)e->n * sizeof(float));
    b->n_inputs++;
    in->roles = SQZ__ROLE_BIT(role);
    in->have = SQZ_QSTAT_X2;
    in->st.n_in = n_in;
    in->st.n_tokens = n_tokens;
    in->st.x2 = in->x2;
    in->n_mat = n_mat;
    if (e->counts && e->n_mat == n_mat) {
        in->mat_tokens = sqz__malloc((size_t)n_mat * sizeof(float));
        if (!in->mat_tokens) return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for '%s'", path, e->name);
        memcpy(in->mat_tokens, e->counts, (size_t)n_mat * sizeof(float));
    }
    return SQZ_OK;
}

/* Block `layer`'s statistics from every entry naming it (an empty block when none does). */
static sqz_status fill_block(const char *path, const sqz__imatrix *im, const sqz_model *m, int32_t layer,
                             sqz_calib_block *b) {
    b->layer = layer;
    const int64_t n_tokens = (int64_t)(im->chunks > 0 ? im->chunks : 0) * (im->chunk_size > 0 ? im->chunk_size : 0);
    b->n_tokens = n_tokens;
    for (int64_t i = 0; i < im->n; i++) {
        const sqz__imatrix_entry *e = &im->e[i];
        int32_t l;
        sqz_role role;
        if (!parse_name(e->name, &l, &role))
            return FAIL("%s: '%s' is not a tensor name sqz knows (blk.N.ROLE.weight, output.weight)", path, e->name);
        if (l != layer) continue;
        const sqz_tensor *t = sqz_model_get(m, role, layer, SQZ_PARAM_WEIGHT);
        if (!t || (t->ndim != 2 && t->ndim != 3))
            return FAIL("%s: '%s' names no matrix of the model (%lld blocks)", path, e->name,
                        (long long)m->hp.n_layers);
        const int64_t cols = sqz_tensor_row_len(t), mats = t->ndim == 3 ? t->shape[0] : 1;
        if (cols * mats != e->n)
            return FAIL("%s: '%s': %lld values, the model's tensor has %lld columns%s (an imatrix of another model?)",
                        path, e->name, (long long)e->n, (long long)cols, mats > 1 ? " in each expert" : "");
        SQZ_TRY(add_input(path, b, e, role, n_tokens, cols));
    }
    return SQZ_OK;
}

sqz_status sqz__imatrix_to_stats(const char *path, const sqz__imatrix *im, const sqz_model *m,
                                 sqz_calib_stats **out) {
    *out = NULL;
    sqz_calib_stats *st = sqz__calloc(1, sizeof *st);
    if (!st || !(st->blocks = sqz__calloc((size_t)m->hp.n_layers + 1, sizeof *st->blocks))) {
        free(st);
        return SQZ_ERROR(SQZ_ERR_NOMEM, "%s: no memory for %lld blocks", path, (long long)m->hp.n_layers + 1);
    }
    st->have = SQZ_QSTAT_X2;
    st->n_layers = m->hp.n_layers;
    st->d_model = m->hp.d_model;
    st->vocab = m->hp.vocab_size;
    snprintf(st->arch, sizeof st->arch, "%s", m->hp.arch);
    st->n_windows = im->chunks > 0 ? im->chunks : 0;
    st->ctx = im->chunk_size > 0 ? im->chunk_size : 0;
    sqz_status s = SQZ_OK;
    for (int32_t l = 0; l <= m->hp.n_layers && s == SQZ_OK; l++) {
        sqz_calib_block *b = &st->blocks[st->n_blocks];
        s = fill_block(path, im, m, l < m->hp.n_layers ? l : -1, b); /* the classifier's input last */
        if (b->n_inputs > 0) st->n_blocks++;
        else sqz_calib_block_free(b);
    }
    if (s != SQZ_OK) {
        sqz_calib_stats_free(st);
        return s;
    }
    *out = st;
    return SQZ_OK;
}

sqz_status sqz_calib_stats_read_imatrix(const char *path, const sqz_model *m, sqz_calib_stats **out) {
    *out = NULL;
    sqz_mapping *map;
    SQZ_TRY(sqz_map(path, &map));
    sqz__imatrix im;
    sqz_status s = sqz__imatrix_parse(path, map->data, map->size, &im);
    sqz_unmap(map);
    if (s == SQZ_OK) s = sqz__imatrix_to_stats(path, &im, m, out);
    sqz__imatrix_free(&im);
    return s;
}
