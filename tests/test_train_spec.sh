#!/usr/bin/env bash
# test_train_spec: pipetrain train --model-spec, as text and as a file.
#  - an MSE regression spec trains on synthetic-regression data on two
#    stages (--balance counting the spec's layers) and its loss falls;
#  - a spec classifier of the digits trains to a held-out accuracy;
#  - a spec saved to a checkpoint resumes; another spec is refused;
#  - eval of a Llama-style spec's checkpoint (tokens in, every next token
#    scored) gives a loss below the untrained one, the same on two stages;
#    eval of a regression spec is refused;
#  - bad specs and balances are refused (exit 2) naming the layer and its
#    position.
set -euo pipefail
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

reg='linear 16 32; tanh; linear 32 4 bias=0; mse'
"$PIPETRAIN" train --model-spec "$reg" --data-format synthetic-regression --steps 60 \
  --batch 16 --microbatches 4 --stages 2 --balance 2,1 --lr 3e-3 --metrics "$tmp/m.jsonl" \
  --save "$tmp/reg" >"$tmp/reg.log" 2>&1 || { cat "$tmp/reg.log"; fail "regression spec"; }
first=$(head -n 1 "$tmp/m.jsonl" | sed 's/.*"loss": *\([0-9.e+-]*\).*/\1/')
last=$(tail -n 1 "$tmp/m.jsonl" | sed 's/.*"loss": *\([0-9.e+-]*\).*/\1/')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < 0.8 * a) }' ||
  fail "the regression loss did not fall: $first -> $last"

# the same spec from a file resumes the run; another spec is refused
printf '# a regression MLP\nlinear 16 32\ntanh\nlinear 32 4 bias=0\nmse\n' >"$tmp/reg.spec"
"$PIPETRAIN" train --model-spec "$tmp/reg.spec" --data-format synthetic-regression \
  --steps 70 --batch 16 --microbatches 4 --lr 3e-3 --resume "$tmp/reg" >"$tmp/resume.log" 2>&1 ||
  { cat "$tmp/resume.log"; fail "resume from a spec file"; }
if "$PIPETRAIN" train --model-spec 'linear 16 8; tanh; linear 8 4; mse' \
  --data-format synthetic-regression --steps 70 --resume "$tmp/reg" >"$tmp/other.log" 2>&1; then
  fail "a checkpoint of another spec resumed"
fi
grep -q "spec" "$tmp/other.log" || { cat "$tmp/other.log"; fail "no message naming the spec"; }

fortunes=/usr/share/games/fortunes/fortunes
if [ -s "$fortunes" ]; then
  lm='tok_embedding 256 32 16; llama_block 32 2 kv_heads=1; rmsnorm 32; linear 32 256 bias=0;
      cross_entropy'
  "$PIPETRAIN" train --model-spec "$lm" --data "$fortunes" --steps 60 --batch 8 --lr 3e-3 \
    --save "$tmp/lm.safetensors" >"$tmp/lm.log" 2>&1 || { cat "$tmp/lm.log"; fail "llama spec"; }
  one=$("$PIPETRAIN" eval --load "$tmp/lm.safetensors" --data "$fortunes" --batches 4)
  two=$("$PIPETRAIN" eval --load "$tmp/lm.safetensors" --data "$fortunes" --batches 4 \
    --stages 2)
  [ "$one" = "$two" ] || fail "eval on two stages: '$two', on one: '$one'"
  loss=$(echo "$one" | sed -n 's/^loss \([0-9.]*\) .*/\1/p')
  awk -v l="$loss" 'BEGIN { exit !(l < 4.5) }' || fail "eval of the spec checkpoint: $one"
  if "$PIPETRAIN" eval --load "$tmp/reg" --data "$fortunes" >"$tmp/eval.log" 2>&1; then
    fail "eval of a regression spec ran"
  fi
  grep -q "scores next tokens" "$tmp/eval.log" || { cat "$tmp/eval.log"; fail "eval: no reason"; }
fi

digits="$PT_SOURCE_DIR/data/digits.csv.gz"
if [ -s "$digits" ]; then
  "$PIPETRAIN" train --model-spec 'input 64; (linear 64 128; relu); linear 128 10; cross_entropy' \
    --data "$digits" --steps 300 --batch 32 --microbatches 4 --stages 2 --balance 1,1 \
    --lr 2e-3 >"$tmp/digits.log" 2>&1 || { cat "$tmp/digits.log"; fail "digits spec"; }
  acc=$(sed -n 's/.*held-out accuracy \([0-9.]*\)%.*/\1/p' "$tmp/digits.log")
  awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' || fail "digits accuracy $acc% < 90%"
fi

refuse() { # spec, extra flags, words the message must hold
  local spec=$1 extra=$2; shift 2
  set +e
  "$PIPETRAIN" train --model-spec "$spec" --data-format synthetic-regression --steps 1 \
    $extra >"$tmp/bad.log" 2>&1
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { cat "$tmp/bad.log"; fail "'$spec' $extra exited $rc, not 2"; }
  for w in "$@"; do
    grep -qF -- "$w" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "'$spec': no '$w'"; }
  done
}
refuse 'linear 16 32; tanhh; linear 32 4; mse' '' 'layer 2' "unknown layer 'tanhh'"
refuse 'linear 16 32; tanh; linear 31 4; mse' '' 'layer 3 (linear)' 'in is 31'
refuse 'linear 16 32; mse; linear 32 4' '' 'layer 2 (mse)' 'last'
refuse "$reg" '--stages 2 --balance 1,1' 'balance sums to 2 layers' '3 layers'
refuse "$reg" '--layers 3' '--layers'

# plan: a spec profiled and cut, its partition printed in the spec's layers
# (the loss joins the layer before it: 5 layers of 6 blocks)
mlp5='input 64; linear 64 256; relu; linear 256 256; relu; linear 256 10; cross_entropy'
"$PIPETRAIN" plan --model-spec "$mlp5" --stages 2 --batch 8 --reps 1 >"$tmp/plan.log" 2>&1 ||
  { cat "$tmp/plan.log"; fail "plan --model-spec"; }
cut=$(sed -n 's/^partition (--balance \([0-9]*\),\([0-9]*\)):$/\1 \2/p' "$tmp/plan.log")
[ -n "$cut" ] && [ $(( ${cut% *} + ${cut#* } )) -eq 5 ] ||
  { cat "$tmp/plan.log"; fail "plan: a partition of 5 layers, not '$cut'"; }
"$PIPETRAIN" plan --model-spec "$mlp5" --balance 4,1 --reps 1 >"$tmp/plan.log" 2>&1 &&
  grep -q '^1 *4\.\.5 ' <(sed -n '/^stage/,/^(memory/p' "$tmp/plan.log" | tail -n +2) ||
  { cat "$tmp/plan.log"; fail "plan --balance 4,1: stage 1 should hold blocks 4..5"; }
set +e
"$PIPETRAIN" plan --model-spec "$mlp5" --balance 3,3 >"$tmp/bad.log" 2>&1; rc1=$?
"$PIPETRAIN" plan --model-spec "$mlp5" --embd 64 >"$tmp/bad2.log" 2>&1; rc2=$?
set -e
[ "$rc1" -eq 2 ] && grep -q "5 layers" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "plan balance"; }
[ "$rc2" -eq 2 ] && grep -q "model-spec" "$tmp/bad2.log" || { cat "$tmp/bad2.log"; fail "plan flags"; }
echo "ok"
