#!/usr/bin/env bash
# tests/cli/test_onnx_read_hostile.sh - damaged ONNX directories are refused in one line naming the file, the
# tensor where there is one, and the reason, exit 1, never a crash (issue 50; docs/onnx.md, "Reading back").
# From a q4_0 export of stories260K (MatMulNBits, scales, the rest f32): model.onnx truncated, a bad varint, a
# length past the end, an external offset past model.onnx.data, model.onnx.data missing, a config.json whose
# sizes the initializers do not have, an unknown initializer name, a NaN scale, no config.json (an ONNX model
# sqz did not write), a model.onnx that is not protobuf, and another tool's model (its producer_name). Exit 77 when the model is missing.
set -uo pipefail
SQZ=${SQZ_BIN:-sqz}
DATA=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:-}}
M=$DATA/models/stories260K/stories260K.bin
[ -f "$M" ] || { echo "skipping: $M not found"; exit 77; }
command -v python3 > /dev/null || { echo "skipping: python3 (byte surgery) not found"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
expect() { # expect RC PATTERN -- command...
  local rc=$1 pat=$2; shift 3
  "$@" > "$tmp/out" 2>&1
  local got=$?
  if [ "$got" = "$rc" ] && grep -q -- "$pat" "$tmp/out" && [ "$(grep -c . "$tmp/out")" -le 1 ]; then
    echo "ok:   $* -> $rc: $(cat "$tmp/out")"
  else echo "FAIL: $* -> $got (want $rc, one line, '$pat'):"; cat "$tmp/out"; fail=1; fi
}
fresh() { rm -rf "$tmp/$1"; cp -r "$tmp/good" "$tmp/$1"; }
py() { python3 -c "$@"; }

"$SQZ" compress "$M" --quant q4_0:pure -o "$tmp/q4.gguf" -q > /dev/null 2>&1 || { echo "FAIL: compress"; exit 1; }
"$SQZ" export "$tmp/q4.gguf" --to onnx -o "$tmp/good" > /dev/null 2>&1 || { echo "FAIL: export"; exit 1; }
if "$SQZ" inspect "$tmp/good" --no-tensors 2>&1 | grep -q "onnx checkpoint"; then echo "ok:   the export opens"
else echo "FAIL: sqz inspect $tmp/good"; fail=1; fi

fresh trunc
py "import sys; p=sys.argv[1]; b=open(p,'rb').read(); open(p,'wb').write(b[:len(b)//2])" "$tmp/trunc/model.onnx"
expect 1 "model.onnx: byte [0-9]*: .*past the end" -- "$SQZ" inspect "$tmp/trunc"

fresh varint
py "import sys; open(sys.argv[1],'wb').write(bytes([8]+[0xff]*11))" "$tmp/varint/model.onnx"
expect 1 "model.onnx: byte 0: a truncated or overlong varint (field 1)" -- "$SQZ" inspect "$tmp/varint"

fresh len
py "import sys; open(sys.argv[1],'wb').write(bytes([8,10,0x3a,0xff,0xff,3,0x0a,0]))" "$tmp/len/model.onnx"
expect 1 "model.onnx: byte 2: field 7's length 65535 runs past the end of the ModelProto" -- "$SQZ" inspect "$tmp/len"

# the longest "offset" value of external_data made as long, all nines: far past the data file's end
fresh offset
py "
import re, sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read())
m = max(re.finditer(rb'\x0a\x06offset\x12([\x01-\x14])', bytes(b)), key=lambda m: m.group(1)[0])
n = m.group(1)[0]; b[m.end():m.end() + n] = b'9' * n
open(p, 'wb').write(b)" "$tmp/offset/model.onnx"
expect 1 "model.onnx.data: tensor '.*': external data \[9*, +[0-9]*) runs past the end of the file" -- "$SQZ" inspect "$tmp/offset"

fresh nodata
rm "$tmp/nodata/model.onnx.data"
expect 1 "model.onnx: the weights' file .*model.onnx.data is missing" -- "$SQZ" inspect "$tmp/nodata"

fresh dims
py "import re, sys; p=sys.argv[1]; s=re.sub(r'(\"intermediate_size\":\s*)192', r'\g<1>128', open(p).read()); open(p,'w').write(s)" "$tmp/dims/config.json"
expect 1 "dims: tensor 'model.layers.0.mlp.gate_proj.weight' has shape \[192, 64\], the architecture needs \[128, 64\]" -- "$SQZ" inspect "$tmp/dims"

fresh name
py "import sys; p=sys.argv[1]; b=open(p,'rb').read().replace(b'model.norm.weight', b'model.nrom.weight'); open(p,'wb').write(b)" "$tmp/name/model.onnx"
expect 1 "model.onnx: tensor 'model.nrom.weight': not a llama tensor name" -- "$SQZ" inspect "$tmp/name"

# a NaN written over the first scale of layer 0's q projection
fresh nan
py "
import re, struct, sys
d = sys.argv[1]; b = open(d + '/model.onnx', 'rb').read()
i = b.index(b'model.layers.0.self_attn.q_proj.weight_scales')
off = int(re.search(rb'offset\x12[\x01-\x14]([0-9]+)', b[i:]).group(1))
with open(d + '/model.onnx.data', 'r+b') as f: f.seek(off); f.write(struct.pack('<f', float('nan')))" "$tmp/nan"
expect 1 "model.onnx: tensor 'model.layers.0.self_attn.q_proj.weight': scale nan of row 0 block 0 is not finite" -- "$SQZ" inspect "$tmp/nan"

fresh nocfg
rm "$tmp/nocfg/config.json"
expect 1 "model.onnx: no config.json beside it: .*re-export the model with this sqz" -- "$SQZ" inspect "$tmp/nocfg"
expect 1 "model.onnx: no config.json beside it" -- "$SQZ" inspect "$tmp/nocfg/model.onnx"

fresh text
echo "not a protobuf" > "$tmp/text/model.onnx"
expect 1 "model.onnx: " -- "$SQZ" inspect "$tmp/text"

# another tool's model (producer_name 'pytorch'; config.json beside it, as optimum writes one)
fresh other
py "import sys; p=sys.argv[1]; b=open(p,'rb').read(); i=b.index(b'\x12\x03sqz'); open(p,'wb').write(b[:i]+b'\x12\x07pytorch'+b[i+5:])" "$tmp/other/model.onnx"
expect 1 "model.onnx: written by 'pytorch', not by sqz" -- "$SQZ" inspect "$tmp/other"
exit $fail
