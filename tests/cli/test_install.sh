#!/usr/bin/env bash
# `cmake --install` puts the library, the headers and sqz.pc in a prefix, and a program
# built only from pkg-config's flags opens a real model through the shared library.
set -euo pipefail
build=${SQZ_BUILD_DIR:?}
# A sanitized library cannot be linked into an uninstrumented program: the Release run covers this.
case "${SQZ_SANITIZE:-OFF}" in ON|on|1|TRUE|true) echo "skipping under sanitizers"; exit 77 ;; esac
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
for f in include/sqz/sqz.h include/sqz/model.h bin/sqz; do
  [ -e "$tmp/prefix/$f" ] || { echo "missing $f after install"; exit 1; }
done
libdir=$(dirname "$(find "$tmp/prefix" -name sqz.pc | head -1)")/..
ls "$libdir"/libsqz.a "$libdir"/libsqz.so > /dev/null
cat > "$tmp/use.c" <<'C'
#include <stdio.h>
#include <sqz/sqz.h>
int main(int argc, char **argv) {
    sqz_model *m;
    if (sqz_model_open(argv[1], NULL, &m) != SQZ_OK) { fprintf(stderr, "%s\n", sqz_last_error()); return 1; }
    printf("%s %lld\n", m->hp.arch, (long long)sqz_model_param_count(m));
    sqz_model_free(m);
    (void)argc;
    return 0;
}
C
export PKG_CONFIG_PATH="$libdir/pkgconfig"
cc -std=c11 -Wall -Werror "$tmp/use.c" -o "$tmp/use" $(pkg-config --cflags --libs sqz)
model=$data/models/stories260K/stories260K.bin
if [ ! -f "$model" ]; then  # installed and linked, but what the test is for did not run
  echo "skipping: $model not found (install and link ok; opening a model not tested)"
  exit 77
fi
out=$(LD_LIBRARY_PATH="$libdir" "$tmp/use" "$model")
echo "installed library says: $out"
[ "$out" = "llama 260032" ]

# A CUDA build: the CUDA module is installed beside libsqz.so and found from there (shared) and
# from bin/ (a program linking libsqz.a); pkg-config names no CUDA library. Without a GPU the
# error is then CUDA's own ("no usable CUDA device ..."), not the loader's.
if [ -e "$build/libsqz_cuda.so" ]; then
  unset SQZ_CUDA_MODULE
  ls "$libdir"/libsqz_cuda.so > /dev/null
  if pkg-config --static --libs sqz | grep -qi cuda; then echo "pkg-config names CUDA: $(pkg-config --static --libs sqz)"; exit 1; fi
  cat > "$tmp/gpu.c" <<'C'
#include <stdio.h>
#include <sqz/sqz.h>
int main(void) {
    sqz_backend *b = NULL;
    const sqz_status s = sqz_backend_cuda(-1, &b);
    printf("%d devices, backend: %s\n", sqz_cuda_device_count(), s == SQZ_OK ? "ok" : sqz_last_error());
    sqz_backend_free(b);
    return 0;
}
C
  cc -std=c11 -Wall -Werror "$tmp/gpu.c" -o "$tmp/gpu" $(pkg-config --cflags --libs sqz)
  cc -std=c11 -Wall -Werror "$tmp/gpu.c" -o "$tmp/prefix/bin/gpu_static" $(pkg-config --cflags sqz) \
    "$libdir/libsqz.a" $(pkg-config --static --libs sqz | sed 's/-lsqz\b//')
  # the static program finds lib/libsqz_cuda.so from bin/ (../lib), without LD_LIBRARY_PATH
  for p in "$tmp/gpu" "$tmp/prefix/bin/gpu_static"; do
    if [ "$p" = "$tmp/gpu" ]; then out=$(LD_LIBRARY_PATH="$libdir" "$p"); else out=$("$p"); fi
    echo "$(basename "$p"): $out"
    case "$out" in *"CUDA backend unavailable"*) echo "the installed CUDA module was not loaded"; exit 1 ;; esac
  done
fi
