#!/usr/bin/env python3
"""Oracle test: what sqz writes as an HF directory, read back by the `safetensors` package.

usage: test_st_roundtrip.py LIBSQZ_SO

Opens tinystories-656K with libsqz (ctypes, public API: sqz_model_open / sqz_model_save),
writes it as safetensors (kept dtype, then f16), and checks with safetensors.numpy and json:
  - every tensor equals the original file's (the tied embedding is stored under its canonical
    name model.embed_tokens.weight; the original keeps it as lm_head.weight with an alias);
  - no lm_head.weight, tie_word_embeddings true, __metadata__ {"format": "pt"}, 8-byte aligned header;
  - config.json carries the original hyperparameters and torch_dtype;
  - f16 output equals numpy's float16 rounding of the original (both round to nearest even).
Exit 77 (skipped) when the model, numpy or safetensors is missing.
"""
import ctypes
import json
import os
import struct
import sys
import tempfile

try:
    import numpy as np
    from safetensors import safe_open
    from safetensors.numpy import load_file
except ImportError as e:  # pragma: no cover
    print("skipping: %s" % e)
    sys.exit(77)

SQZ_FORMAT_SAFETENSORS = 1
SQZ_DTYPE_F16 = 1


class SaveOpts(ctypes.Structure):
    _fields_ = [("format", ctypes.c_int), ("dtype", ctypes.c_int), ("progress", ctypes.c_void_p),
                ("progress_user", ctypes.c_void_p), ("replace", ctypes.c_bool), ("sign_key", ctypes.c_char_p),
                ("deflate", ctypes.c_bool), ("provenance_json", ctypes.c_char_p), ("onnx_ops", ctypes.c_int),
                ("hf_format", ctypes.c_int), ("gguf_file_type", ctypes.c_int), ("gguf_blocks_float", ctypes.c_bool)]


def data_dir():
    d = os.environ.get("SQZ_TEST_DATA") or os.environ.get("SQZ_TEST_DATA_DEFAULT")
    if not d:
        d = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared")
    return d


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if os.environ.get("SQZ_SANITIZE", "").upper() in ("ON", "1", "TRUE", "YES"):
        # an ASan-instrumented libsqz.so cannot be loaded into an uninstrumented python
        print("skipping: sanitizer build")
        return 77
    src = os.path.join(data_dir(), "models", "tinystories-656K")
    if not os.path.isfile(os.path.join(src, "model.safetensors")):
        print("skipping: %s not found" % src)
        return 77
    lib = ctypes.CDLL(sys.argv[1])
    lib.sqz_model_open.argtypes = [ctypes.c_char_p, ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p)]
    lib.sqz_model_open.restype = ctypes.c_int
    lib.sqz_model_save.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(SaveOpts)]
    lib.sqz_model_save.restype = ctypes.c_int
    lib.sqz_model_free.argtypes = [ctypes.c_void_p]
    lib.sqz_last_error.restype = ctypes.c_char_p

    def check(status, what):
        if status != 0:
            raise SystemExit("%s failed (%d): %s" % (what, status, lib.sqz_last_error().decode()))

    model = ctypes.c_void_p()
    check(lib.sqz_model_open(src.encode(), None, ctypes.byref(model)), "sqz_model_open")
    orig = load_file(os.path.join(src, "model.safetensors"))
    with open(os.path.join(src, "config.json")) as f:
        orig_cfg = json.load(f)
    with safe_open(os.path.join(src, "model.safetensors"), "np") as f:
        assert f.metadata().get("model.embed_tokens.weight") == "lm_head.weight", f.metadata()
    expect = dict(orig)
    expect["model.embed_tokens.weight"] = expect.pop("lm_head.weight")

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for dtype, np_dtype, torch_dtype in ((-1, np.float32, "float32"), (SQZ_DTYPE_F16, np.float16, "float16")):
            out = os.path.join(tmp, "out%d" % dtype)
            opts = SaveOpts(SQZ_FORMAT_SAFETENSORS, dtype, None, None)
            check(lib.sqz_model_save(model, out.encode(), ctypes.byref(opts)), "sqz_model_save")
            path = os.path.join(out, "model.safetensors")
            with open(path, "rb") as f:
                n = struct.unpack("<Q", f.read(8))[0]
                header = json.loads(f.read(n))
            assert (8 + n) % 8 == 0, "header not 8-byte aligned"
            assert header["__metadata__"] == {"format": "pt"}, header["__metadata__"]
            got = load_file(path)
            assert "lm_head.weight" not in got
            assert sorted(got) == sorted(expect), (sorted(got), sorted(expect))
            for name, want in expect.items():
                w = want.astype(np_dtype)
                if got[name].dtype != np_dtype or got[name].shape != w.shape or not np.array_equal(got[name], w):
                    print("FAIL %s: %s %s %s" % (name, got[name].dtype, got[name].shape, path))
                    failures += 1
            with open(os.path.join(out, "config.json")) as f:
                cfg = json.load(f)
            for key in ("model_type", "hidden_size", "intermediate_size", "num_hidden_layers",
                        "num_attention_heads", "num_key_value_heads", "vocab_size", "max_position_embeddings",
                        "rms_norm_eps", "rope_theta", "tie_word_embeddings", "hidden_act", "bos_token_id",
                        "eos_token_id"):
                if cfg.get(key) != orig_cfg.get(key):
                    print("FAIL config.json %s: %r != %r" % (key, cfg.get(key), orig_cfg.get(key)))
                    failures += 1
            if cfg.get("architectures") != ["LlamaForCausalLM"] or cfg.get("torch_dtype") != torch_dtype:
                print("FAIL config.json: %r %r" % (cfg.get("architectures"), cfg.get("torch_dtype")))
                failures += 1
            # the tokenizer files, when the vocabulary came from them, are the originals verbatim
            for name in ("tokenizer.json", "tokenizer_config.json"):
                if os.path.exists(os.path.join(out, name)):
                    with open(os.path.join(out, name)) as f, open(os.path.join(src, name)) as g:
                        if json.load(f) != json.load(g):
                            print("FAIL %s differs from the original" % name)
                            failures += 1
            print("ok: %s (%d tensors; %s)" % (path, len(got), " ".join(sorted(os.listdir(out)))))
    lib.sqz_model_free(model)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
