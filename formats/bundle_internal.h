/* formats/bundle_internal.h - what the bundle writer and reader of formats/ share
 * (the layout itself is edge/bundle_format.h, one definition for sqz and the edge runtime). */
#ifndef SQZ_BUNDLE_INTERNAL_H
#define SQZ_BUNDLE_INTERNAL_H

#include "edge/bundle_format.h"
#include "formats/formats_internal.h"

/* The bundle dtype code (GGML type id) tensor t is stored with under the options, or
 * UINT32_MAX when a bundle cannot hold it (sqz__bundle_check says why). */
uint32_t sqz__bundle_dtype(const sqz_tensor *t, const sqz_save_opts *o);
/* The section bytes of a scheme-quantized tensor (I8_ROW / U4_GROUP layout, edge/bundle_format.h),
 * malloc'd. */
sqz_status sqz__bundle_qpack(const sqz_tensor *t, uint8_t **out, size_t *n);
/* The sqz dtype of a bundle dtype code (SQZ_DTYPE_COUNT for an unknown code). */
sqz_dtype sqz__bundle_dtype_of(uint32_t code);
/* SQZ_ERR_UNSUPPORTED naming the first tensor a bundle cannot hold, the family or the
 * vocabulary it cannot carry; SQZ_OK otherwise. */
sqz_status sqz__bundle_check(const sqz_model *m, const sqz_save_opts *o);
/* The HPARAMS, VOCAB and MANIFEST sections' bytes (malloc'd). */
sqz_status sqz__bundle_hparams(const sqz_model *m, uint8_t **out, size_t *n);
sqz_status sqz__bundle_vocab(const sqz_model *m, uint8_t **out, size_t *n);
sqz_status sqz__bundle_manifest(const sqz_model *m, const sqz_save_opts *o, uint8_t **out, size_t *n);
/* Ed25519 signature of msg with the secret key file (SQZB_SIG_SIZE bytes: signature then the
 * public key). SQZ_ERR_UNSUPPORTED when sqz was built without libsodium. */
sqz_status sqz__bundle_sign(const char *key_path, const uint8_t *msg, size_t n, uint8_t sig[SQZB_SIG_SIZE]);

/* The writer and the reader. */
sqz_status sqz__bundle_save(const sqz_model *m, const char *path, const sqz_save_opts *o);
sqz_status sqz__bundle_open(const char *path, sqz_model *m);
/* The reader on bytes in memory (kept valid by the caller as long as m lives); `path` names
 * them in errors. For the fuzz harness. */
sqz_status sqz__bundle_read_mem(const char *path, const uint8_t *data, size_t size, sqz_model *m);
bool sqz__looks_bundle(const uint8_t *p, size_t n);
#endif
