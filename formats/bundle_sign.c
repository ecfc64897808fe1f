/*
 * formats/bundle_sign.c - Ed25519 keys and signatures for bundles, through libsodium.
 *
 * Key files are raw bytes: KEY.key holds libsodium's 64-byte secret key (seed then public
 * key), KEY.pub the 32-byte public key the loaders verify with. Built without libsodium
 * (SQZ_HAVE_SODIUM undefined), signing and key generation say so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef SQZ_HAVE_SODIUM
#include <sodium.h>
#endif

#include "formats/bundle_internal.h"

#ifdef SQZ_HAVE_SODIUM
static sqz_status sodium_ready(void) {
    SQZ_RETURN_IF(sodium_init() < 0, SQZ_ERR_IO, "libsodium: initialisation failed");
    return SQZ_OK;
}

/* The secret key: created new (never over an existing key), readable by its owner only. */
static sqz_status write_secret(const char *path, const uint8_t *k, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    SQZ_RETURN_IF(fd < 0, SQZ_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    ssize_t w = write(fd, k, n);
    int e = errno;
    bool ok = w == (ssize_t)n && fsync(fd) == 0;
    close(fd);
    if (!ok) {
        unlink(path);
        return SQZ_ERROR(SQZ_ERR_IO, "%s: cannot write: %s", path, strerror(e));
    }
    return SQZ_OK;
}

static sqz_status write_key(const char *path, const uint8_t *k, size_t n) {
    sqz_outfile *f;
    SQZ_TRY(sqz_outfile_open(path, &f));
    sqz_status s = sqz_outfile_write(f, k, n);
    if (s != SQZ_OK) {
        sqz_outfile_abort(f);
        return s;
    }
    return sqz_outfile_commit(f);
}
#endif

sqz_status sqz__bundle_sign(const char *key_path, const uint8_t *msg, size_t n, uint8_t sig[SQZB_SIG_SIZE]) {
#ifdef SQZ_HAVE_SODIUM
    SQZ_TRY(sodium_ready());
    char *key;
    size_t len;
    SQZ_TRY(sqz_read_file(key_path, 4096, &key, &len));
    if (len != crypto_sign_SECRETKEYBYTES) {
        sodium_memzero(key, len);
        free(key);
        return SQZ_ERROR(SQZ_ERR_FORMAT, "%s: %zu bytes; an Ed25519 secret key file (sqz export --keygen) is %d",
                         key_path, len, crypto_sign_SECRETKEYBYTES);
    }
    crypto_sign_detached(sig, NULL, msg, n, (const unsigned char *)key);
    memcpy(sig + 64, key + 32, 32); /* the public half of libsodium's secret key */
    sodium_memzero(key, len);
    free(key);
    return SQZ_OK;
#else
    (void)msg, (void)n, (void)sig;
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: this sqz was built without libsodium: it cannot sign", key_path);
#endif
}

sqz_status sqz_bundle_keygen(const char *prefix) {
    SQZ_RETURN_IF(!prefix || !*prefix, SQZ_ERR_INVALID_ARG, "keygen: empty prefix");
#ifdef SQZ_HAVE_SODIUM
    SQZ_TRY(sodium_ready());
    size_t n = strlen(prefix) + 5;
    char *sk_path = sqz__malloc(n), *pk_path = sqz__malloc(n);
    if (!sk_path || !pk_path) {
        free(sk_path);
        free(pk_path);
        return SQZ_ERR_NOMEM;
    }
    snprintf(sk_path, n, "%s.key", prefix);
    snprintf(pk_path, n, "%s.pub", prefix);
    uint8_t pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
    crypto_sign_keypair(pk, sk);
    sqz_status s = write_key(pk_path, pk, sizeof pk);
    if (s == SQZ_OK) s = write_secret(sk_path, sk, sizeof sk);
    sodium_memzero(sk, sizeof sk);
    free(sk_path);
    free(pk_path);
    return s;
#else
    return SQZ_ERROR(SQZ_ERR_UNSUPPORTED, "%s: this sqz was built without libsodium: it cannot make keys", prefix);
#endif
}
