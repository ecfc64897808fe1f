/*
 * edge/bundle.c - opening a .sqzb bundle: everything edge/bundle_format.h promises is checked
 * before anything in it is used, with bounds and overflow checks on every offset and count
 * (the file is untrusted: tests/cli/test_bundle_hostile.sh, tests/fuzz/fuzz_bundle.c).
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "edge/crypto.h"
#include "edge/edge_internal.h"

int sqze__fail(char *err, size_t cap, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return 1;
}

uint32_t sqze__u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
uint64_t sqze__u64(const uint8_t *p) { return (uint64_t)sqze__u32(p) | (uint64_t)sqze__u32(p + 4) << 32; }
float sqze__f32(const uint8_t *p) {
    uint32_t u = sqze__u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static const char *const role_names[] = {
    "token_embd", "position_embd", "token_types", "token_embd_norm", "output_norm", "output", "pooler",
    "attn_norm",  "attn_q",        "attn_k",      "attn_v",          "attn_output", "attn_output_norm",
    "ffn_norm",   "ffn_gate",      "ffn_up",      "ffn_down",        "layer_output_norm"};

const char *sqze_role_name(uint32_t role) {
    return role < sizeof role_names / sizeof role_names[0] ? role_names[role] : "?";
}

static const char *kind_name(uint32_t k) {
    switch (k) {
    case SQZB_KIND_MANIFEST: return "manifest";
    case SQZB_KIND_HPARAMS: return "hparams";
    case SQZB_KIND_VOCAB: return "vocab";
    case SQZB_KIND_TENSOR: return "tensor";
    default: return "unknown kind";
    }
}

const char *sqze_section_label(const sqze_section *s, char *buf, size_t cap) {
    if (s->kind != SQZB_KIND_TENSOR) {
        snprintf(buf, cap, "section %u (%s)", (unsigned)s->index, kind_name(s->kind));
    } else if (s->layer >= 0) {
        snprintf(buf, cap, "section %u (tensor blk.%d.%s.%s)", (unsigned)s->index, (int)s->layer,
                 sqze_role_name(s->role), s->param ? "bias" : "weight");
    } else {
        snprintf(buf, cap, "section %u (tensor %s.%s)", (unsigned)s->index, sqze_role_name(s->role),
                 s->param ? "bias" : "weight");
    }
    return buf;
}

void sqze_bundle_section(const sqze_bundle *b, uint32_t i, sqze_section *s) {
    const uint8_t *e = b->table + (size_t)i * b->entry_size;
    s->index = i;
    s->kind = sqze__u32(e);
    s->flags = sqze__u32(e + 4);
    s->offset = sqze__u64(e + 8);
    s->stored = sqze__u64(e + 16);
    s->size = sqze__u64(e + 24);
    s->crc = sqze__u32(e + 32);
    s->dtype = sqze__u32(e + 36);
    s->layer = (int32_t)sqze__u32(e + 40);
    s->role = (uint32_t)e[44] | (uint32_t)e[45] << 8;
    s->param = e[46];
    s->ndim = e[47];
    s->shape[0] = sqze__u64(e + 48);
    s->shape[1] = sqze__u64(e + 56);
    s->digest = e + 64;
    s->data = b->data + s->offset; /* in bounds once sqze_bundle_open accepted the table */
}

int64_t sqze_bundle_find(const sqze_bundle *b, uint32_t kind, sqze_section *s) {
    for (uint32_t i = 0; i < b->n_sections; i++) {
        sqze_bundle_section(b, i, s);
        if (s->kind == kind) return i;
    }
    return -1;
}

#define CRC_BAD(stored, computed) ((stored) != (computed))

/* The bytes [from, to) must be zero (padding); 0 if so. */
static int check_zero(const uint8_t *p, uint64_t from, uint64_t to, char *err, size_t cap, const char *where) {
    for (uint64_t i = from; i < to; i++)
        if (p[i] != 0)
            return sqze__fail(err, cap, "nonzero byte at %llu in the padding %s", (unsigned long long)i, where);
    return 0;
}

static int known_kind(uint32_t k) { return k >= SQZB_KIND_MANIFEST && k <= SQZB_KIND_TENSOR; }

/* Header fields, then the table's place in the file. */
static int check_header(sqze_bundle *b, const uint8_t *p, size_t size, uint64_t *table_off, uint64_t *sig_off,
                        char *err, size_t cap) {
    if (size < SQZB_HEADER_SIZE)
        return sqze__fail(err, cap, "truncated: %zu bytes, a bundle header alone is %d", size, SQZB_HEADER_SIZE);
    if (memcmp(p, SQZB_MAGIC, 8) != 0) return sqze__fail(err, cap, "not an sqz bundle (bad magic)");
    b->major = (uint32_t)p[8] | (uint32_t)p[9] << 8;
    b->minor = (uint32_t)p[10] | (uint32_t)p[11] << 8;
    if (b->major != SQZB_MAJOR)
        return sqze__fail(err, cap, "bundle format version %u.%u; this runtime reads version %d.x", (unsigned)b->major,
                          (unsigned)b->minor, SQZB_MAJOR);
    uint32_t hcrc = sqze_crc32(0, p, 60);
    if (CRC_BAD(sqze__u32(p + 60), hcrc))
        return sqze__fail(err, cap, "header: CRC-32 mismatch (stored %08x, computed %08x)", (unsigned)sqze__u32(p + 60),
                          (unsigned)hcrc);
    b->flags = sqze__u32(p + 12);
    if (b->flags & SQZB_F_UNKNOWN_MASK & ~SQZB_F_SIGNED)
        return sqze__fail(err, cap, "header: unknown required flags %#x", (unsigned)(b->flags & ~SQZB_F_SIGNED));
    b->n_sections = sqze__u32(p + 16);
    b->entry_size = sqze__u32(p + 20);
    *table_off = sqze__u64(p + 24);
    uint64_t file_size = sqze__u64(p + 32);
    *sig_off = sqze__u64(p + 40);
    uint32_t sig_size = sqze__u32(p + 48);
    if (file_size != size)
        return sqze__fail(err, cap, "%s: the file is %zu bytes, its header says %llu", size < file_size ? "truncated"
                          : "trailing bytes", size, (unsigned long long)file_size);
    if (b->n_sections == 0 || b->n_sections > SQZB_MAX_SECTIONS)
        return sqze__fail(err, cap, "header: %u sections (1 to %u)", (unsigned)b->n_sections, SQZB_MAX_SECTIONS);
    if (b->entry_size < SQZB_ENTRY_SIZE || b->entry_size > 4096 || b->entry_size % 8)
        return sqze__fail(err, cap, "header: section entries of %u bytes", (unsigned)b->entry_size);
    uint64_t tbytes = (uint64_t)b->n_sections * b->entry_size; /* < 2^29: no overflow */
    if (*table_off < SQZB_HEADER_SIZE || *table_off > size || tbytes > size - *table_off)
        return sqze__fail(err, cap, "section table (%llu bytes at %llu) is outside the file of %zu bytes",
                          (unsigned long long)tbytes, (unsigned long long)*table_off, size);
    b->table = p + *table_off;
    uint32_t tcrc = sqze_crc32(0, b->table, (size_t)tbytes);
    if (CRC_BAD(sqze__u32(p + 52), tcrc))
        return sqze__fail(err, cap, "section table: CRC-32 mismatch (stored %08x, computed %08x)",
                          (unsigned)sqze__u32(p + 52), (unsigned)tcrc);
    int is_signed = (b->flags & SQZB_F_SIGNED) != 0;
    if (is_signed != (*sig_off != 0) || (is_signed && sig_size != SQZB_SIG_SIZE) || (!is_signed && sig_size))
        return sqze__fail(err, cap, "header: inconsistent signature fields (flag %d, offset %llu, size %u)", is_signed,
                          (unsigned long long)*sig_off, (unsigned)sig_size);
    if (is_signed && (*sig_off > size || size - *sig_off < SQZB_SIG_SIZE))
        return sqze__fail(err, cap, "signature (at %llu) is outside the file of %zu bytes",
                          (unsigned long long)*sig_off, size);
    b->sig = is_signed ? p + *sig_off : NULL;
    uint32_t scrc = is_signed ? sqze_crc32(0, b->sig, SQZB_SIG_SIZE) : 0;
    if (CRC_BAD(sqze__u32(p + 56), scrc))
        return sqze__fail(err, cap, "signature block: CRC-32 mismatch (stored %08x, computed %08x)",
                          (unsigned)sqze__u32(p + 56), (unsigned)scrc);
    return 0;
}

/* Every entry: kind, flags, place (aligned, inside, in order, no overlap), CRC-32. */
static int check_sections(const sqze_bundle *b, uint64_t table_off, uint64_t sig_off, char *err, size_t cap) {
    uint64_t end = table_off + (uint64_t)b->n_sections * b->entry_size; /* first free byte */
    uint64_t limit = b->sig ? sig_off : b->size;
    char lab[96];
    for (uint32_t i = 0; i < b->n_sections; i++) {
        sqze_section s;
        const uint8_t *e = b->table + (size_t)i * b->entry_size;
        s.index = i;
        s.kind = sqze__u32(e);
        s.flags = sqze__u32(e + 4);
        s.offset = sqze__u64(e + 8);
        s.stored = sqze__u64(e + 16);
        s.size = sqze__u64(e + 24);
        s.layer = (int32_t)sqze__u32(e + 40);
        s.role = (uint32_t)e[44] | (uint32_t)e[45] << 8;
        s.param = e[46];
        sqze_section_label(&s, lab, sizeof lab);
        if (!known_kind(s.kind) && (s.flags & SQZB_S_REQUIRED))
            return sqze__fail(err, cap, "%s: kind %u is required but unknown to this runtime", lab, (unsigned)s.kind);
        if (s.flags & 0xFFFFu & ~(SQZB_S_DEFLATE | SQZB_S_REQUIRED))
            return sqze__fail(err, cap, "%s: unknown flags %#x", lab, (unsigned)s.flags);
        if (s.offset % SQZB_ALIGN)
            return sqze__fail(err, cap, "%s: offset %llu is not a multiple of %d", lab, (unsigned long long)s.offset,
                              SQZB_ALIGN);
        if (s.offset > limit || s.stored > limit - s.offset)
            return sqze__fail(err, cap, "%s: %llu bytes at %llu reach outside the file (sections end at %llu)", lab,
                              (unsigned long long)s.stored, (unsigned long long)s.offset, (unsigned long long)limit);
        if (s.offset < end)
            return sqze__fail(err, cap, "%s: at %llu overlaps the %s ending at %llu", lab,
                              (unsigned long long)s.offset, i ? "previous section" : "section table",
                              (unsigned long long)end);
        if (check_zero(b->data, end, s.offset, err, cap, "before a section")) return 1;
        if (!(s.flags & SQZB_S_DEFLATE) && s.size != s.stored)
            return sqze__fail(err, cap, "%s: size %llu differs from the %llu bytes stored uncompressed", lab,
                              (unsigned long long)s.size, (unsigned long long)s.stored);
        end = s.offset + s.stored;
        uint32_t crc = sqze_crc32(0, b->data + s.offset, (size_t)s.stored);
        if (CRC_BAD(sqze__u32(e + 32), crc))
            return sqze__fail(err, cap, "%s: CRC-32 mismatch (stored %08x, computed %08x): the bundle is corrupt", lab,
                              (unsigned)sqze__u32(e + 32), (unsigned)crc);
    }
    return check_zero(b->data, end, limit, err, cap, "after the last section");
}

static int check_signature(const sqze_bundle *b, uint64_t table_off, const uint8_t *pk, char *err, size_t cap) {
    if (!b->sig) return sqze__fail(err, cap, "the bundle is not signed, and a public key was given");
    size_t tbytes = (size_t)b->n_sections * b->entry_size;
    /* the signed message: header bytes 0..55 || table */
    (void)table_off;
    int bad = sqze_ed25519_verify(b->sig, b->data, SQZB_SIGNED_HEADER, b->table, tbytes, pk);
    if (bad) return sqze__fail(err, cap, "signature: not valid for this public key (signed by another key, or altered)");
    char lab[96];
    for (uint32_t i = 0; i < b->n_sections; i++) {
        sqze_section s;
        sqze_bundle_section(b, i, &s);
        uint8_t h[64];
        sqze_sha512 st;
        sqze_sha512_init(&st);
        sqze_sha512_update(&st, s.data, (size_t)s.stored);
        sqze_sha512_final(&st, h);
        if (memcmp(h, s.digest, SQZB_DIGEST_SIZE) != 0)
            return sqze__fail(err, cap, "%s: SHA-512 digest mismatch: altered after signing",
                              sqze_section_label(&s, lab, sizeof lab));
    }
    return 0;
}

int sqze_bundle_open(sqze_bundle *b, const void *data, size_t size, const uint8_t *pubkey, char *err, size_t cap) {
    memset(b, 0, sizeof *b);
    b->data = data;
    b->size = size;
    uint64_t table_off = 0, sig_off = 0;
    if (!data && size) return sqze__fail(err, cap, "no data");
    if (check_header(b, data, size, &table_off, &sig_off, err, cap)) return 1;
    if (check_sections(b, table_off, sig_off, err, cap)) return 1;
    if (pubkey) {
        if (check_signature(b, table_off, pubkey, err, cap)) return 1;
        b->verified = 1;
    }
    return 0;
}
