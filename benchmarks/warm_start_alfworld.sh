#!/usr/bin/env bash
# Warm start on CPU-sized ALFWorld, as a plain recipe: expert demonstrations -> SFT (held-out
# success before and after) -> a short SAPO run from the SFT checkpoint (held-out success at its
# end). Every step is an ordinary agentrl command with the same config, so the prompts SFT
# trains on are the ones the rollout engine builds. Prints the wall-clock minutes of each step.
#
#   bash benchmarks/warm_start_alfworld.sh                 # defaults below
#   DEMOS=64 EPOCHS=3 ITERS=8 OUT=runs/ws bash benchmarks/warm_start_alfworld.sh
#
# Results of a run are recorded in docs/benchmarks.md ("Warm start on ALFWorld").
set -euo pipefail

AGENTRL=${AGENTRL:-.venv/bin/agentrl}
CONFIG=${CONFIG:-benchmarks/configs/cpu_alfworld_small.yaml}
OUT=${OUT:-runs/warm-start-alfworld}
DEMOS=${DEMOS:-32}      # expert episodes on the train split
EPOCHS=${EPOCHS:-2}     # SFT passes over them
EVAL=${EVAL:-12}        # held-out (eval split) episodes: seeds 0..EVAL-1, two per task type at 12
ITERS=${ITERS:-4}       # SAPO iterations from the SFT checkpoint
mkdir -p "$OUT"

minutes() { python3 -c "print(f'{($2 - $1) / 60:.1f}')"; }

t0=$(date +%s)
"$AGENTRL" demos --config "$CONFIG" --episodes "$DEMOS" -o "$OUT/demos.jsonl"
t1=$(date +%s)
"$AGENTRL" sft --config "$CONFIG" --demos "$OUT/demos.jsonl" --epochs "$EPOCHS" \
  --eval-before --eval-episodes "$EVAL" -o "$OUT/sft" 2>&1 | tee "$OUT/sft.log"
t2=$(date +%s)
"$AGENTRL" run sapo --config "$CONFIG" --model "$OUT/sft" --run-dir "$OUT/sapo" \
  --set train.iterations="$ITERS" --set train.eval_every="$ITERS" \
  --set train.eval_episodes="$EVAL" --set train.save_every="$ITERS" 2>&1 | tee "$OUT/sapo.log"
t3=$(date +%s)

{
  echo "demos: $(minutes "$t0" "$t1") min ($DEMOS episodes)"
  echo "sft (with both evals): $(minutes "$t1" "$t2") min ($EPOCHS epochs)"
  echo "sapo (with its final eval): $(minutes "$t2" "$t3") min ($ITERS iterations)"
  grep -E "success" "$OUT/sft.log" || true
  python3 -c "import json,sys; [print('sapo eval at iteration', r['iteration'], 'success', r['eval/success_rate'], 'train success', r.get('rollout/success_rate')) for r in map(json.loads, open(sys.argv[1])) if 'eval/success_rate' in r]" "$OUT/sapo/metrics.jsonl"
} | tee "$OUT/summary.txt"
