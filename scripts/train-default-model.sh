#!/usr/bin/env bash
# Reproduces the repository's default model with one command: the King James
# Bible corpus (Debian's bible-kjv), a 4096-token SentencePiece-style
# vocabulary learned from it, a LLaMA trained from scratch on the CPU, its
# loss plot and a model card.
#
#   scripts/train-default-model.sh [--resume]
#
# Environment (all optional):
#   OUT=models/kjv-llama.gguf   the model file (its card is written next to it, .md)
#   WORK=build/default-model    corpus, vocabulary, log and checkpoint
#   THREADS=2                   training threads
#   STEPS=...                   override the number of updates (e.g. a quick trial)
#   PLOT=docs/training-loss.png the loss plot
#
# --resume continues an interrupted run from WORK/train.ckpt (a checkpoint is
# written every 200 updates and on Ctrl-C) and gives the same model as an
# uninterrupted run.
set -euo pipefail
cd "$(dirname "$0")/.."

# ---- the recipe --------------------------------------------------------------------------
VOCAB_SIZE=4096
N_EMBD=256 N_LAYER=4 N_HEAD=8 N_HEAD_KV=8 N_FF=768 N_CTX=128
BATCH=16 ACCUM=1 LR=2e-3 LR_MIN=1e-4 WEIGHT_DECAY=0.1 SEED=1
STEPS=${STEPS:-2400}                          # 4.9 M tokens, 4.8 passes over the corpus
WARMUP=$(( STEPS >= 1000 ? 100 : STEPS / 10 ))
QUANT=q8_0
# ------------------------------------------------------------------------------------------

OUT=${OUT:-models/kjv-llama.gguf}
WORK=${WORK:-build/default-model}
THREADS=${THREADS:-2}
PLOT=${PLOT:-docs/training-loss.png}
resume=()
if [ "${1:-}" = "--resume" ]; then
  resume=(--resume "$WORK/train.ckpt")
elif [ $# -gt 0 ]; then
  echo "usage: $0 [--resume]" >&2
  exit 2
fi

echo "== building llamac"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$THREADS" --target llamac >/dev/null
llamac=build/llamac

mkdir -p "$WORK" "$(dirname "$OUT")" "$(dirname "$PLOT")"
if [ ! -s "$WORK/corpus/kjv-train.txt" ]; then
  echo "== corpus"
  scripts/make-corpus.sh "$WORK/corpus"
fi
if [ ! -s "$WORK/vocab.gguf" ]; then
  echo "== tokenizer ($VOCAB_SIZE tokens)"
  "$llamac" train-tokenizer --vocab-size "$VOCAB_SIZE" --character-coverage 1.0 --name "kjv-$VOCAB_SIZE" \
    -o "$WORK/vocab.gguf" "$WORK/corpus/kjv-train.txt"
fi

echo "== training ($STEPS updates, $THREADS threads)"
start=$(date +%s)
"$llamac" train --vocab "$WORK/vocab.gguf" \
  --train-data "$WORK/corpus/kjv-train.txt" --valid-data "$WORK/corpus/kjv-valid.txt" \
  --n-embd "$N_EMBD" --n-layer "$N_LAYER" --n-head "$N_HEAD" --n-head-kv "$N_HEAD_KV" --n-ff "$N_FF" \
  --n-ctx "$N_CTX" --batch "$BATCH" --accum "$ACCUM" --steps "$STEPS" --lr "$LR" --lr-min "$LR_MIN" \
  --warmup "$WARMUP" --weight-decay "$WEIGHT_DECAY" --seed "$SEED" -t "$THREADS" \
  --eval-interval 100 --log "$WORK/train.log" --checkpoint "$WORK/train.ckpt" --checkpoint-interval 200 \
  --name "llamac KJV ${N_EMBD}x${N_LAYER}" --quantize "$QUANT" -o "$OUT" "${resume[@]}" | tee "$WORK/train.out"
minutes=$(( ($(date +%s) - start + 59) / 60 ))

echo "== plot"
python3 scripts/plot-loss.py "$WORK/train.log" "$PLOT" --title "llamac train: KJV, ${N_EMBD}x${N_LAYER}, $STEPS updates"

# The card: the recipe and the last logged losses.
last_val=$(awk -F'\t' 'NR > 1 && $6 != "" { v = $6 } END { printf "%.4f", v }' "$WORK/train.log")
last_train=$(awk -F'\t' 'NR > 1 && $5 != "" { n++; s[n % 100] = $5 }
  END { k = n < 100 ? n : 100; t = 0; for (i in s) t += s[i]; printf "%.4f", t / k }' "$WORK/train.log")
card="${OUT%.gguf}.md"
cat > "$card" <<EOF
# $(basename "$OUT")

A LLaMA-architecture model trained from scratch by \`llamac train\` on the King
James Bible (public domain; Debian's \`bible-kjv\`, one verse per line, every
50th verse held out for validation).

| | |
|---|---|
| shape | n_embd $N_EMBD, n_layer $N_LAYER, n_head $N_HEAD, n_head_kv $N_HEAD_KV, n_ff $N_FF, n_ctx $N_CTX |
| vocabulary | $VOCAB_SIZE tokens, SentencePiece-style BPE learned by \`llamac train-tokenizer\` |
| training | $STEPS updates of $((BATCH * ACCUM)) sequences of $N_CTX tokens ($(( STEPS * BATCH * ACCUM * N_CTX )) tokens), AdamW (0.9, 0.95), lr $LR -> $LR_MIN (warm-up $WARMUP, cosine), weight decay $WEIGHT_DECAY, seed $SEED |
| weights | $QUANT ($(du -k "$OUT" | cut -f1) KiB) |
| final loss | train $last_train (mean of the last 100 updates), validation $last_val (nats per token) |
| time | about $minutes min with $THREADS threads |

Reproduce: \`scripts/train-default-model.sh\` (the loss curve: \`$PLOT\`).
EOF
echo "== wrote $OUT, $card, $PLOT"
