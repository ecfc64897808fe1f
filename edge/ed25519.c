/*
 * edge/ed25519.c - Ed25519 signature verification (RFC 8032, section 5.1.7), nothing else.
 *
 * Field elements of GF(2^255 - 19) are 16 limbs of 16 bits in int64 (the representation of
 * TweetNaCl, Bernstein et al. 2014, public domain): slow next to ref10 but short, and the
 * loader verifies one signature per bundle. Points are extended coordinates (X, Y, Z, T).
 * Tested against libsodium's signatures (tests/cli/test_bundle.sh: a bundle signed by
 * `sqz export --sign` opens with the right key and is refused with another).
 */
#include <string.h>

#include "edge/crypto.h"

typedef int64_t gf[16];

static const gf gf0 = {0}, gf1 = {1};
/* d = -121665/121666, 2d, the base point (x, 4/5), sqrt(-1) */
static const gf D = {0x78a3, 0x1359, 0x4dca, 0x75eb, 0xd8ab, 0x4141, 0x0a4d, 0x0070,
                     0xe898, 0x7779, 0x4079, 0x8cc7, 0xfe73, 0x2b6f, 0x6cee, 0x5203};
static const gf D2 = {0xf159, 0x26b2, 0x9b94, 0xebd6, 0xb156, 0x8283, 0x149a, 0x00e0,
                      0xd130, 0xeef3, 0x80f2, 0x198e, 0xfce7, 0x56df, 0xd9dc, 0x2406};
static const gf BX = {0xd51a, 0x8f25, 0x2d60, 0xc956, 0xa7b2, 0x9525, 0xc760, 0x692c,
                      0xdc5c, 0xfdd6, 0xe231, 0xc0a4, 0x53fe, 0xcd6e, 0x36d3, 0x2169};
static const gf BY = {0x6658, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666,
                      0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666, 0x6666};
static const gf SQRTM1 = {0xa0b0, 0x4a0e, 0x1b27, 0xc4ee, 0xe478, 0xad2f, 0x1806, 0x2f43,
                          0xd7a7, 0x3dfb, 0x0099, 0x2b4d, 0xdf0b, 0x4fc1, 0x2480, 0x2b83};
/* the group order L = 2^252 + 27742317777372353535851937790883648493, little-endian */
static const int64_t L[32] = {0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7,
                              0xa2, 0xde, 0xf9, 0xde, 0x14, 0,    0,    0,    0,    0,    0,
                              0,    0,    0,    0,    0,    0,    0,    0,    0,    0x10};

static void set(gf r, const gf a) { memcpy(r, a, sizeof(gf)); }

/* floor(v / 2^16) without shifting a negative value */
static int64_t div16(int64_t v) { return v >= 0 ? v / 65536 : -((-v + 65535) / 65536); }

static void carry(gf o) {
    for (int i = 0; i < 16; i++) {
        int64_t c = div16(o[i]);
        o[i] -= c * 65536;
        if (i < 15) o[i + 1] += c;
        else o[0] += 38 * c;
    }
}

static void sel(gf p, gf q, int b) { /* swap p and q when b == 1 */
    int64_t c = -(int64_t)b;
    for (int i = 0; i < 16; i++) {
        int64_t t = c & (p[i] ^ q[i]);
        p[i] ^= t;
        q[i] ^= t;
    }
}

static void pack(uint8_t o[32], const gf n) {
    gf m, t;
    set(t, n);
    carry(t); carry(t); carry(t);
    for (int j = 0; j < 2; j++) {
        m[0] = t[0] - 0xffed;
        for (int i = 1; i < 15; i++) {
            m[i] = t[i] - 0xffff - ((m[i - 1] >> 16) & 1);
            m[i - 1] &= 0xffff;
        }
        m[15] = t[15] - 0x7fff - ((m[14] >> 16) & 1);
        int b = (int)((m[15] >> 16) & 1);
        m[14] &= 0xffff;
        sel(t, m, 1 - b);
    }
    for (int i = 0; i < 16; i++) {
        o[2 * i] = (uint8_t)(t[i] & 0xff);
        o[2 * i + 1] = (uint8_t)(t[i] >> 8);
    }
}

static int neq(const gf a, const gf b) {
    uint8_t c[32], d[32];
    pack(c, a);
    pack(d, b);
    return memcmp(c, d, 32) != 0;
}

static int parity(const gf a) {
    uint8_t d[32];
    pack(d, a);
    return d[0] & 1;
}

static void unpack(gf o, const uint8_t n[32]) {
    for (int i = 0; i < 16; i++) o[i] = n[2 * i] + ((int64_t)n[2 * i + 1] << 8);
    o[15] &= 0x7fff;
}

static void add_f(gf o, const gf a, const gf b) { for (int i = 0; i < 16; i++) o[i] = a[i] + b[i]; }
static void sub_f(gf o, const gf a, const gf b) { for (int i = 0; i < 16; i++) o[i] = a[i] - b[i]; }

static void mul(gf o, const gf a, const gf b) {
    int64_t t[31] = {0};
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 16; j++) t[i + j] += a[i] * b[j];
    for (int i = 0; i < 15; i++) t[i] += 38 * t[i + 16];
    for (int i = 0; i < 16; i++) o[i] = t[i];
    carry(o);
    carry(o);
}

static void sq(gf o, const gf a) { mul(o, a, a); }

static void pow2523(gf o, const gf i) { /* i^((p-5)/8) */
    gf c;
    set(c, i);
    for (int a = 250; a >= 0; a--) {
        sq(c, c);
        if (a != 1) mul(c, c, i);
    }
    set(o, c);
}

static void inv(gf o, const gf i) { /* i^(p-2) */
    gf c;
    set(c, i);
    for (int a = 253; a >= 0; a--) {
        sq(c, c);
        if (a != 2 && a != 4) mul(c, c, i);
    }
    set(o, c);
}

/* p += q (extended coordinates; Hisil et al. 2008, add-2008-hwcd-3) */
static void padd(gf p[4], gf q[4]) {
    gf a, b, c, d, t, e, f, g, h;
    sub_f(a, p[1], p[0]); sub_f(t, q[1], q[0]); mul(a, a, t);
    add_f(b, p[0], p[1]); add_f(t, q[0], q[1]); mul(b, b, t);
    mul(c, p[3], q[3]); mul(c, c, D2);
    mul(d, p[2], q[2]); add_f(d, d, d);
    sub_f(e, b, a); sub_f(f, d, c); add_f(g, d, c); add_f(h, b, a);
    mul(p[0], e, f); mul(p[1], h, g); mul(p[2], g, f); mul(p[3], e, h);
}

static void cswap(gf p[4], gf q[4], int b) { for (int i = 0; i < 4; i++) sel(p[i], q[i], b); }

static void ppack(uint8_t r[32], gf p[4]) {
    gf tx, ty, zi;
    inv(zi, p[2]);
    mul(tx, p[0], zi);
    mul(ty, p[1], zi);
    pack(r, ty);
    r[31] ^= (uint8_t)(parity(tx) << 7);
}

static void scalarmult(gf p[4], gf q[4], const uint8_t s[32]) {
    set(p[0], gf0); set(p[1], gf1); set(p[2], gf1); set(p[3], gf0);
    for (int i = 255; i >= 0; i--) {
        int b = (s[i / 8] >> (i & 7)) & 1;
        cswap(p, q, b);
        padd(q, p);
        padd(p, p);
        cswap(p, q, b);
    }
}

static void scalarbase(gf p[4], const uint8_t s[32]) {
    gf q[4];
    set(q[0], BX); set(q[1], BY); set(q[2], gf1);
    mul(q[3], BX, BY);
    scalarmult(p, q, s);
}

/* r = -A from its encoding; -1 when it is not a point */
static int unpackneg(gf r[4], const uint8_t p[32]) {
    gf t, chk, num, den, den2, den4, den6;
    set(r[2], gf1);
    unpack(r[1], p);
    sq(num, r[1]);
    mul(den, num, D);
    sub_f(num, num, r[2]);
    add_f(den, r[2], den);
    sq(den2, den); sq(den4, den2); mul(den6, den4, den2);
    mul(t, den6, num); mul(t, t, den);
    pow2523(t, t);
    mul(t, t, num); mul(t, t, den); mul(t, t, den); mul(r[0], t, den);
    sq(chk, r[0]); mul(chk, chk, den);
    if (neq(chk, num)) mul(r[0], r[0], SQRTM1);
    sq(chk, r[0]); mul(chk, chk, den);
    if (neq(chk, num)) return -1;
    if (parity(r[0]) == (p[31] >> 7)) sub_f(r[0], gf0, r[0]);
    mul(r[3], r[0], r[1]);
    return 0;
}

/* r = x mod L for a 64-byte little-endian x (TweetNaCl's modL) */
static void mod_l(uint8_t r[32], int64_t x[64]) {
    int64_t c;
    for (int i = 63; i >= 32; i--) {
        c = 0;
        int j;
        for (j = i - 32; j < i - 12; j++) {
            x[j] += c - 16 * x[i] * L[j - (i - 32)];
            c = (x[j] + 128) >> 8;
            x[j] -= c * 256;
        }
        x[j] += c;
        x[i] = 0;
    }
    c = 0;
    for (int j = 0; j < 32; j++) {
        x[j] += c - (x[31] >> 4) * L[j];
        c = x[j] >> 8;
        x[j] &= 255;
    }
    for (int j = 0; j < 32; j++) x[j] -= c * L[j];
    for (int i = 0; i < 32; i++) {
        x[i + 1] += x[i] >> 8;
        r[i] = (uint8_t)(x[i] & 255);
    }
}

/* S < L (RFC 8032 requires it; libsodium refuses a larger S too) */
static int canonical_s(const uint8_t s[32]) {
    for (int i = 31; i >= 0; i--) {
        if (s[i] < L[i]) return 1;
        if (s[i] > L[i]) return 0;
    }
    return 0; /* S == L */
}

int sqze_ed25519_verify(const uint8_t sig[64], const uint8_t *msg1, size_t n1, const uint8_t *msg2, size_t n2,
                        const uint8_t pk[32]) {
    gf p[4], q[4];
    if (!canonical_s(sig + 32)) return -1;
    if (unpackneg(q, pk)) return -1;
    uint8_t h[64], hr[32], t[32];
    sqze_sha512 s;
    sqze_sha512_init(&s);
    sqze_sha512_update(&s, sig, 32);
    sqze_sha512_update(&s, pk, 32);
    if (n1) sqze_sha512_update(&s, msg1, n1);
    if (n2) sqze_sha512_update(&s, msg2, n2);
    sqze_sha512_final(&s, h);
    int64_t x[64];
    for (int i = 0; i < 64; i++) x[i] = h[i];
    mod_l(hr, x);
    scalarmult(p, q, hr);     /* h * (-A) */
    scalarbase(q, sig + 32);  /* S * B */
    padd(p, q);
    ppack(t, p);
    return memcmp(t, sig, 32) == 0 ? 0 : -1;
}
