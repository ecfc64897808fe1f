/*
 * sqz/status.h - status codes and the thread's detailed error message.
 *
 * Every fallible libsqz function returns an sqz_status. SQZ_OK (0) is success;
 * any other value is an error whose detailed, human-readable message (naming the
 * file, the tensor and the reason, e.g.
 *   "model.safetensors: tensor 'lm_head.weight': data offsets [0, 4096) exceed file size 1234")
 * is kept per thread and returned by sqz_last_error() until the next error on the
 * same thread replaces it.
 *
 * The list below is the single source of the enum values, their names and their
 * generic messages (libuv's UV_ERRNO_MAP idea). Values are append-only.
 */
#ifndef SQZ_STATUS_H
#define SQZ_STATUS_H

#include "sqz/api.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SQZ_STATUS_MAP(X)                                                         \
    X(OK, "success")                                                              \
    X(ERR_IO, "input/output error")                                               \
    X(ERR_NOMEM, "out of memory")                                                 \
    X(ERR_FORMAT, "malformed file")                                               \
    X(ERR_UNSUPPORTED, "unsupported feature")                                     \
    X(ERR_ARCH, "unknown or unsupported architecture")                            \
    X(ERR_SHAPE, "tensor shape mismatch")                                         \
    X(ERR_INVALID_ARG, "invalid argument")                                        \
    X(ERR_NOT_FOUND, "not found")                                                 \
    X(ERR_DEVICE, "device error")                                                 \
    X(ERR_INTERRUPTED, "interrupted")                                             \
    X(ERR_NUMERIC, "numerical failure")

typedef enum sqz_status {
#define SQZ__STATUS_ENUM(name, msg) SQZ_##name,
    SQZ_STATUS_MAP(SQZ__STATUS_ENUM)
#undef SQZ__STATUS_ENUM
    SQZ_STATUS_COUNT
} sqz_status;

/* "SQZ_ERR_FORMAT" for SQZ_ERR_FORMAT; "SQZ_UNKNOWN_STATUS" for values out of range.
 * Returns a static string. */
SQZ_API const char *sqz_status_name(sqz_status s);

/* The generic message of a status ("malformed file"). Returns a static string. */
SQZ_API const char *sqz_status_message(sqz_status s);

/* The detailed message of the last error recorded on this thread, or "" if none.
 * The string is owned by the library and valid until the next error on this thread. */
SQZ_API const char *sqz_last_error(void);

/* "core/file.c:123" where the last error on this thread was recorded, or "". */
SQZ_API const char *sqz_last_error_location(void);

/* Forget the thread's last error. */
SQZ_API void sqz_clear_error(void);

#ifdef __cplusplus
}
#endif
#endif
