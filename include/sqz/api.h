/*
 * sqz/api.h - SQZ_API marks what libsqz exports. The shared library is built with hidden
 * visibility: only declarations in include/sqz/ carrying SQZ_API are visible to programs,
 * so the sqz__ internals shared between the library's own modules stay private. The version of
 * the library is here too, where every module (and every public header) can see it.
 */
#ifndef SQZ_API_H
#define SQZ_API_H

#if defined(__GNUC__) || defined(__clang__)
#define SQZ_API __attribute__((visibility("default")))
#else
#define SQZ_API
#endif

#define SQZ_VERSION_MAJOR 0
#define SQZ_VERSION_MINOR 1
#define SQZ_VERSION_PATCH 0
#define SQZ_VERSION_STRING "0.1.0"

#endif
