/*
 * edge/crypto.h - the integrity primitives of the edge runtime, with no library behind them:
 * CRC-32 (zlib's polynomial), SHA-512 (FIPS 180-4) and Ed25519 signature verification
 * (RFC 8032). Plain C99; constant-time is not a goal (everything verified is public).
 */
#ifndef SQZE_CRYPTO_H
#define SQZE_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

/* CRC-32 as zlib's crc32(crc, p, n): start with crc = 0, chain calls. */
uint32_t sqze_crc32(uint32_t crc, const void *p, size_t n);

typedef struct sqze_sha512 {
    uint64_t h[8];
    uint64_t len;      /* bytes hashed so far */
    uint8_t buf[128];
    size_t n;          /* bytes in buf */
} sqze_sha512;
void sqze_sha512_init(sqze_sha512 *s);
void sqze_sha512_update(sqze_sha512 *s, const void *p, size_t n);
void sqze_sha512_final(sqze_sha512 *s, uint8_t out[64]);

/* 0 when sig (64 bytes) is a valid Ed25519 signature of the n bytes of msg (given as two
 * pieces, msg1 then msg2, either may be empty) under public key pk; -1 otherwise (a bad
 * key encoding, a non-canonical S, a wrong signature). */
int sqze_ed25519_verify(const uint8_t sig[64], const uint8_t *msg1, size_t n1, const uint8_t *msg2, size_t n2,
                        const uint8_t pk[32]);
#endif
