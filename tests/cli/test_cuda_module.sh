#!/usr/bin/env bash
# tests/cli/test_cuda_module.sh MODULE LIBSQZ_SO - a CUDA build keeps CUDA out of the way
# until a GPU is asked for (kernels/cuda_loader/cuda_loader.c, docs/kernels.md):
#   1. sqz and libsqz.so need no CUDA library; the module (MODULE, libsqz_cuda.so) needs them and
#      exports its entry only;
#   2. inspect maps no CUDA library and its peak RSS is that of a CPU-only build (a few MB, where
#      mapping cuBLAS/cuBLASLt at start cost ~220 MB);
#   3. with the module absent, or present but unloadable (a library it needs is missing, as the
#      CUDA runtime is on a machine without it), CPU commands work and `bench kernels --gpu-only`
#      fails with one line saying why;
#   4. the real module is found beside sqz without SQZ_CUDA_MODULE.
set -u
module=${1:?usage: test_cuda_module.sh MODULE LIBSQZ_SO}
libso=${2:?usage: test_cuda_module.sh MODULE LIBSQZ_SO}
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
model=$data/models/stories260K/stories260K.bin
[ -f "$model" ] || { echo "skipping: $model not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
unset SQZ_CUDA_MODULE
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
needed() { readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'; }

# ---- 1. who links what
for f in "$sqz" "$libso"; do
  cuda_deps=$(needed "$f" | grep -E '^lib(cuda|cudart|cublas|cublasLt|cusolver)\.' | tr '\n' ' ')
  check "$(basename "$f") needs no CUDA library (${cuda_deps:-none})" '[ -z "$cuda_deps" ]'
done
mod_deps=$(needed "$module" | tr '\n' ' ')
check "the module needs cudart, cuBLAS, cuBLASLt, cuSOLVER ($mod_deps)" \
  '[[ "$mod_deps" == *libcudart.so* && "$mod_deps" == *libcublas.so* && "$mod_deps" == *libcublasLt.so* && "$mod_deps" == *libcusolver.so* ]]'
exported=$(nm -D --defined-only "$module" | awk '{print $NF}' | grep -v '^_' | tr '\n' ' ')
check "the module exports its entry only ($exported)" '[ "$exported" = "sqz__cuda_module_entry " ]'

# ---- 2. inspect pays nothing for CUDA
LD_DEBUG=files "$sqz" inspect "$model" > /dev/null 2> "$tmp/ld"
loaded=$(grep -oE 'file=[^ ]*lib(cuda|cudart|cublas|cublasLt|cusolver|sqz_cuda)\.so[^ ]*' "$tmp/ld" | sort -u | tr '\n' ' ')
check "inspect loads no CUDA library (${loaded:-none})" '[ -z "$loaded" ]'
if [ -x /usr/bin/time ] && [ "${SQZ_SANITIZE:-OFF}" != ON ]; then
  /usr/bin/time -f %M -o "$tmp/rss" "$sqz" inspect "$model" > /dev/null
  rss_kb=$(tail -1 "$tmp/rss")
  # a CPU-only build: ~5 MB; the CUDA libraries mapped at start made it ~222 MB
  check "inspect stories260K: peak RSS ${rss_kb} KB < 32 MB" '[ "$rss_kb" -lt 32768 ]'
else
  echo "skipping: inspect RSS (needs /usr/bin/time and an unsanitized build)"
fi

# ---- 3. CPU commands without a loadable module; the GPU asked for says why in one line
# A module that is there but needs a library that is not (what a machine without the CUDA
# runtime looks like to the loader).
mkdir -p "$tmp/gone" "$tmp/mod"
echo 'int sqz_test_gone(void) { return 0; }' > "$tmp/gone.c"
echo 'int sqz_test_gone(void); int sqz__cuda_module_entry(void) { return sqz_test_gone(); }' > "$tmp/mod.c"
cc -shared -fPIC -o "$tmp/gone/libsqz_test_gone.so" "$tmp/gone.c" &&
  cc -shared -fPIC -o "$tmp/mod/libsqz_cuda.so" "$tmp/mod.c" -L"$tmp/gone" -lsqz_test_gone &&
  rm "$tmp/gone/libsqz_test_gone.so" || { echo "FAIL: cannot build the unloadable module"; fails=$((fails + 1)); }
for case in "absent:/nonexistent/libsqz_cuda.so:no CUDA module at SQZ_CUDA_MODULE=/nonexistent/libsqz_cuda.so" \
            "unloadable:$tmp/mod/libsqz_cuda.so:libsqz_test_gone.so: cannot open shared object file"; do
  name=${case%%:*}; rest=${case#*:}; path=${rest%%:*}; want=${rest#*:}
  export SQZ_CUDA_MODULE=$path
  "$sqz" inspect "$model" > "$tmp/out" 2>&1
  check "module $name: inspect works" '[ $? -eq 0 ] && grep -q llama "$tmp/out"'
  "$sqz" convert "$model" -o "$tmp/$name.gguf" --dtype q8_0 > "$tmp/out" 2>&1
  check "module $name: convert to GGUF Q8_0 works" '[ $? -eq 0 ] && [ -s "$tmp/$name.gguf" ]'
  "$sqz" bench kernels --gpu-only > "$tmp/out" 2> "$tmp/err"; rc=$?
  echo "  bench kernels --gpu-only (exit $rc): $(cat "$tmp/err")"
  check "module $name: --gpu-only -> exit 1, one line: CUDA backend unavailable: ...$want" \
    '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && grep -qF "sqz: error: CUDA backend unavailable: " "$tmp/err" && grep -qF "$want" "$tmp/err"'
  unset SQZ_CUDA_MODULE
done

# The real module on a machine without the CUDA runtime: the directories of the CUDA
# libraries hidden behind an empty one in a private mount namespace (unshare -rm), where allowed.
if unshare -rm true 2> /dev/null; then
  cuda_dirs=$(ldd "$module" | awk '/libcudart|libcublas/ && $3 ~ /^\// {print $3}' | xargs -r -n1 dirname | sort -u | tr '\n' ' ')
  mkdir -p "$tmp/empty"
  mounts=""
  for d in $cuda_dirs; do mounts="$mounts mount --bind '$tmp/empty' '$d' &&"; done
  unshare -rm bash -c "$mounts '$sqz' inspect '$model' > '$tmp/out' 2>&1"
  check "no CUDA runtime (hidden: $cuda_dirs): inspect works" '[ $? -eq 0 ] && grep -q llama "$tmp/out"'
  unshare -rm bash -c "$mounts '$sqz' bench kernels --gpu-only > '$tmp/out' 2> '$tmp/err'"; rc=$?
  echo "  no CUDA runtime: bench kernels --gpu-only (exit $rc): $(cat "$tmp/err")"
  check "no CUDA runtime: --gpu-only -> exit 1, one line: ...libcu*.so.*: cannot open shared object file" \
    '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && grep -qE "CUDA backend unavailable: cannot load the CUDA module /.*libsqz_cuda.so: libcu[a-zA-Z]*\.so[.0-9]*: cannot open shared object file" "$tmp/err"'
else
  echo "skipping: the real module without the CUDA runtime (unshare -rm not permitted here)"
fi

# ---- 4. the real module, found beside sqz
"$sqz" bench kernels --gpu-only --quick > "$tmp/out" 2> "$tmp/err"; rc=$?
echo "  real module: bench kernels --gpu-only (exit $rc): $(head -1 "$tmp/err")"
if [ $rc -eq 0 ]; then
  check "real module: a GPU is there and benchmarked" 'grep -q "^GPU " "$tmp/out"'
else
  # no device or no driver: the module loaded (the error is CUDA's, not the loader's)
  check "real module found beside sqz: the error is CUDA's (exit 1, one line)" \
    '[ $rc -eq 1 ] && [ $(wc -l < "$tmp/err") -eq 1 ] && ! grep -q "CUDA backend unavailable" "$tmp/err" && grep -qi "cuda" "$tmp/err"'
fi
[ "$fails" -eq 0 ]
