#!/usr/bin/env python3
"""sqz's chat templates (runtime/chat.c) against Jinja, the way transformers renders them.

For every template file in SQZ_CHAT_TEMPLATES (a folder of *.jinja files, e.g. llama.cpp's
models/templates: real models' templates), sqz_chat_detect is asked for its family; each
recognised one is rendered by sqz_chat_apply (libsqz.so, through ctypes) and by jinja2 with
transformers' settings (trim_blocks, lstrip_blocks, raise_exception, tojson) for three
conversations (a user message; a system and a user message; a user, assistant, user exchange),
with the generation prompt, and the two strings must be equal. A conversation the template
itself refuses (raise_exception: Gemma 2 has no system role) is not compared. The templates sqz
does not recognise are listed. Skips (77) without jinja2, libsqz.so (argv[1]) or SQZ_CHAT_TEMPLATES,
or in a sanitizer build (its libsqz.so cannot load into python).
"""
import ctypes
import glob
import os
import sys

try:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
except ImportError:
    print("skipping: jinja2 not installed")
    sys.exit(77)

if os.environ.get("SQZ_SANITIZE", "").upper() in ("ON", "1", "TRUE", "YES"):
    # an ASan-instrumented libsqz.so cannot be loaded into an uninstrumented python
    print("skipping: sanitizer build")
    sys.exit(77)
# default: the four templates of issue 45 (Llama 3.2, Qwen3, Gemma 3, Phi-4-mini: tests/ref/chat_templates)
folder = os.environ.get("SQZ_CHAT_TEMPLATES") or os.path.join(
    os.environ.get("SQZ_SOURCE_DIR") or os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."),
    "tests", "ref", "chat_templates")
if not os.path.isdir(folder):
    print("skipping: set SQZ_CHAT_TEMPLATES to a folder of *.jinja chat templates (llama.cpp's models/templates)")
    sys.exit(77)
lib_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.environ.get("SQZ_BUILD_DIR", "."), "libsqz.so")
if not os.path.exists(lib_path):
    print("skipping: %s not found" % lib_path)
    sys.exit(77)


class Msg(ctypes.Structure):
    _fields_ = [("role", ctypes.c_char_p), ("content", ctypes.c_char_p)]


lib = ctypes.CDLL(lib_path)
lib.sqz_chat_detect.restype, lib.sqz_chat_detect.argtypes = ctypes.c_char_p, [ctypes.c_char_p]
lib.sqz_chat_apply.restype = ctypes.c_int
lib.sqz_chat_apply.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                               ctypes.POINTER(Msg), ctypes.c_size_t, ctypes.c_bool, ctypes.POINTER(ctypes.c_void_p)]
lib.sqz_last_error.restype = ctypes.c_char_p
libc = ctypes.CDLL(None)


def sqz_render(tmpl, msgs, bos, eos, fmt=None):
    arr = (Msg * len(msgs))(*[Msg(m["role"].encode(), m["content"].encode()) for m in msgs])
    out = ctypes.c_void_p()
    st = lib.sqz_chat_apply(fmt.encode() if fmt else None, tmpl.encode(), bos.encode(), eos.encode(), arr, len(msgs), True, ctypes.byref(out))
    if st != 0:
        raise RuntimeError(lib.sqz_last_error().decode())
    s = ctypes.string_at(out.value).decode()
    libc.free(out)
    return s


def raise_exception(msg):
    raise jinja2.exceptions.TemplateError(msg)


def jinja_render(tmpl, msgs, bos, eos, **extra):
    import datetime
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda f: datetime.datetime.now().strftime(f)  # transformers' (Llama 3.2)
    return env.from_string(tmpl).render(messages=msgs, add_generation_prompt=True, bos_token=bos, eos_token=eos,
                                        **extra)


CONVS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    [{"role": "system", "content": "You are terse."}, {"role": "user", "content": " Name three colours. "}],
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
     {"role": "user", "content": "Tell me a joke."}],
]
# The BOS / EOS text each family's vocabulary has (the renderers take them from the vocab).
SPECIAL = {"llama3": ("<|begin_of_text|>", "<|eot_id|>"), "llama3.2": ("<|begin_of_text|>", "<|eot_id|>"),
           "gemma": ("<bos>", "<eos>"), "chatml": ("<|endoftext|>", "<|im_end|>"),
           "qwen3": ("<|endoftext|>", "<|im_end|>"), "phi4": ("<|endoftext|>", "<|endoftext|>")}
# Template switches sqz renders as formats of their own: (format, the variables Jinja gets)
SWITCHES = {"qwen3": [("qwen3-nothink", {"enable_thinking": False})]}

fails, checked, unknown = 0, 0, []
for path in sorted(glob.glob(os.path.join(folder, "*.jinja"))):
    name = os.path.basename(path)
    tmpl = open(path, encoding="utf-8").read()
    fmt = lib.sqz_chat_detect(tmpl.encode())
    if not fmt:
        unknown.append(name)
        continue
    fmt = fmt.decode()
    bos, eos = SPECIAL.get(fmt, ("<s>", "</s>"))
    for i, conv in enumerate(CONVS):
        try:
            want = jinja_render(tmpl, conv, bos, eos)
        except Exception as e:  # the template refuses this conversation (or needs what we do not pass)
            print("n/a:  %s [%s] conversation %d: jinja: %s" % (name, fmt, i, str(e)[:80]))
            continue
        for f, extra in [(None, {})] + SWITCHES.get(fmt, []):
            try:
                want = jinja_render(tmpl, conv, bos, eos, **extra)
                got = sqz_render(tmpl, conv, bos, eos, f)
            except RuntimeError as e:
                got = "ERROR " + str(e)
            checked += 1
            if got == want:
                print("ok:   %s [%s] conversation %d" % (name, f or fmt, i))
            else:
                fails += 1
                print("FAIL: %s [%s] conversation %d\n  jinja: %r\n  sqz:   %r" % (name, f or fmt, i, want, got))
print("not recognised (%d): %s" % (len(unknown), " ".join(unknown)))
print("%d renderings compared, %d differ" % (checked, fails))
sys.exit(1 if fails or not checked else 0)
