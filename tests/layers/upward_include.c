/* tests/layers/upward_include.c - a deliberate upward include, never compiled: the ctest
 * layers_include_upward hands this file to cmake/include_check.cmake as a source of core/, which
 * may see no header of compress/, and passes only when the check refuses it naming this file. */
#include "compress/compress_internal.h"
