#!/usr/bin/env bash
# same_outputs.sh - the product's outputs, recorded once and compared byte
# for byte after a change that must not change them (a refactor, a move).
#
#   bash tests/same_outputs.sh record [SUMS]   run the commands, write their SHA-256 sums
#   bash tests/same_outputs.sh check  [SUMS]   run them again, compare with the sums
#
# SUMS defaults to tests/golden/outputs.sha256 (the outputs themselves are
# megabytes; set SHS_KEEP_OUTPUTS=DIR to keep them for a diff). The outputs: the README's main job
# with each step's loss as f32 bits, the final parameters as safetensors,
# `compare --format json` for three presets, and a recorded ZeRO-3 trace with
# its two time columns (wall-clock microseconds, different every run) blanked.
# Needs build/shardsim built with jansson (compare --format json).
set -euo pipefail
mode=${1:-}
case "$mode" in record|check) ;; *) echo "usage: $0 record|check [DIR]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
sums=${2:-tests/golden/outputs.sha256}
bin=build/shardsim
[ -x "$bin" ] || { echo "same_outputs.sh: error: $bin not built (make)" >&2; exit 1; }

out=$(mktemp -d /tmp/shs-outputs.XXXXXX)
trap 'rm -rf "$out"' EXIT

# the run's step lines without their wall-clock figures (ms, tok/s, eta)
steps_only() { sed -n 's/^\(step *[0-9]*\/[0-9]*\) | \(loss [^|]*\)|.*\(loss bits 0x[0-9a-f]*\).*$/\1 \2 \3/p'; }

"$bin" train --check ddp --steps 20 --loss-bits --export-safetensors "$out/main.safetensors" \
    | steps_only > "$out/main.steps"
"$bin" train --world 3 --strategy zero2 --steps 5 --loss-bits --param-dtype bf16 \
    | steps_only > "$out/zero2-bf16-w3.steps"
for m in gpt2-124m gpt2-1.5b gpt3-175b; do
    "$bin" compare --model "$m" --world 64 --format json --output "$out/compare-$m.json" >/dev/null
done
"$bin" train --world 4 --strategy zero3 --steps 2 --trace "$out/trace" >/dev/null
for f in "$out"/trace/*.trace; do
    awk '/^[0-9]/ { $13 = "-"; $14 = "-" } { print }' "$f" > "$f.notime" && mv "$f.notime" "$f"
done
for f in "$out"/*.steps; do
    [ -s "$f" ] || { echo "same_outputs.sh: error: no step lines in $f (did the output format change?)" >&2; exit 1; }
done

[ -n "${SHS_KEEP_OUTPUTS:-}" ] && { mkdir -p "$SHS_KEEP_OUTPUTS" && cp -r "$out"/. "$SHS_KEEP_OUTPUTS"/; }
now=$(cd "$out" && find . -type f | sort | xargs sha256sum)
if [ "$mode" = record ]; then
    mkdir -p "$(dirname "$sums")" && printf '%s\n' "$now" > "$sums"
    echo "recorded the sums of $(wc -l < "$sums") files in $sums"
    exit 0
fi
if [ "$now" = "$(cat "$sums")" ]; then
    echo "same outputs: $(wc -l < "$sums") files byte-identical to $sums"
    exit 0
fi
echo "same_outputs.sh: outputs differ from $sums:"
diff <(cat "$sums") <(printf '%s\n' "$now") | sed -n 's/^> [0-9a-f]*  /  /p'
exit 1
