"""tests/py/llamacpp_util.py - what the Python tests that compare sqz with llama.cpp share: the checks
they count, finding llama.cpp's tools (SQZ_LLAMA_CPP_BIN, else PATH), and the perplexities both print."""
import os
import re
import shutil
import subprocess

failures = []


def check(cond, msg):
    """Prints ok / FAIL and counts the failure."""
    print(("ok: " if cond else "FAIL: ") + msg)
    if not cond:
        failures.append(msg)


def llama_tool(name):
    """The path of llama.cpp's tool `name` (in SQZ_LLAMA_CPP_BIN, else on PATH), or None."""
    d = os.environ.get("SQZ_LLAMA_CPP_BIN")
    p = os.path.join(d, name) if d else shutil.which(name)
    return p if p and os.path.exists(p) else None


def llama_ppl(tool, model, text, log, args):
    """llama-perplexity's final estimate (a string, as printed) of model on text with args, or None. Its output
    goes into `log`: into a pipe its logger thread loses the last lines at exit, and now and then into a
    file too, so it is run again (up to four times) when no estimate was printed."""
    for _ in range(4):
        with open(log, "w") as out:
            subprocess.run([tool, "-m", model, "-f", text] + list(args), stdout=out, stderr=subprocess.STDOUT)
        m = re.search(r"Final estimate: PPL = ([0-9.]+)", open(log).read())
        if m:
            return m.group(1)
    return None


def sqz_ppl(sqz, model, text, args):
    """sqz eval's perplexity (a string, as printed) of model on text with args, or None."""
    r = subprocess.run([sqz, "eval", model, "-f", text, "-q"] + list(args), capture_output=True, text=True)
    m = re.search(r"^ppl\s+([0-9.]+)", r.stdout, re.M)
    return m.group(1) if m else None


def finish(what=""):
    """The exit status: 1 when a check failed."""
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("all checks passed" + (" (%s)" % what if what else ""))
    return 0
