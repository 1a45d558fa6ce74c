#!/usr/bin/env bash
# readme_figures.sh - the README's output blocks, made by running the
# commands they show, so they cannot go stale unnoticed.
#
#   bash tests/readme_figures.sh update [README [BLOCK...]]   rerun the commands, rewrite the blocks
#   bash tests/readme_figures.sh check  [README [BLOCK...]]   rerun them, compare (exit 1 naming the block)
#
# BLOCK: main-job, compare-175b, llama3-70b, compare-speed (default: all).
# A generated block is the fenced block right after a line
#   <!-- readme_figures NAME ... -->
# in README.md; NAME picks the command below. What depends on the machine
# (step times, tokens/s, the eta, the devices' share of this machine's RAM,
# benchmark timings) is compared as a placeholder by check and written as
# measured by update, and the README marks such blocks as machine-dependent.
# $SHARDSIM is the program (default build/shardsim).
set -euo pipefail
mode=${1:-}
case "$mode" in update|check) ;; *) echo "usage: $0 update|check [README [BLOCK...]]" >&2; exit 2 ;; esac
cd "$(dirname "$0")/.."
readme=${2:-README.md}
bin=${SHARDSIM:-build/shardsim}
[ -x "$bin" ] || { echo "readme_figures.sh: error: $bin not built (make)" >&2; exit 1; }

# ---- the blocks: gen_NAME prints the block's text -------------------------

# The README's first command: header, steps 1-3, "...", the last two, the summary.
gen_main_job() {
    "$bin" train --check ddp --steps 20 |
        awk '/^step/ { n++; if (n <= 3 || n >= 19) print; else if (n == 4) print "..."; next } { print }'
}

compare_175b_args="--model gpt3-175b --world 1024 --param-dtype bf16 --optimizer adamw --micro-batch 1 --device-mem 80GiB --variants plain"
gen_compare_175b() {
    echo "\$ shardsim compare $compare_175b_args"
    # shellcheck disable=SC2086
    "$bin" compare $compare_175b_args
}

llama3_70b_args="--model llama3-70b --world 64 --gpu h100-sxm --strategies zero3 --attention flash"
# the table's memory columns only (cut after "fits |"), plain and +ckpt rows
gen_llama3_70b() {
    echo "\$ shardsim compare $llama3_70b_args"
    # shellcheck disable=SC2086
    "$bin" compare $llama3_70b_args | awk '/^strategy |^zero3 |^zero3\+ckpt / { i = index($0, " | "); print substr($0, 1, i + 1) " ..." }'
}

gen_compare_speed() {
    echo "\$ shardsim bench --only compare"
    "$bin" bench --only compare
}

blocks="main_job compare_175b llama3_70b compare_speed"
if [ $# -gt 2 ]; then
    shift 2
    chosen=""
    for name in "$@"; do
        b=${name//-/_}
        case " $blocks " in *" $b "*) chosen="$chosen $b" ;; *) echo "readme_figures.sh: error: no block '$name' (known: ${blocks//_/-})" >&2; exit 2 ;; esac
    done
    blocks=$chosen
fi

# What check compares as a placeholder: timings and this machine's RAM share.
machine_free() {
    sed -E 's/\| +[0-9.]+ ms +\| +[0-9]+ tok\/s/| T ms | T tok\/s/;
            s/eta [0-9]+ s/eta T s/;
            s/^mean step time [0-9.]+ ms/mean step time T ms/;
            s/device memory [0-9.]+ [KMGT]?i?B per rank/device memory M per rank/;
            s/meta runs of 2 steps in [0-9.]+ s \([0-9.]+ ms per run\)/meta runs of 2 steps in T s (T ms per run)/'
}

# ---- the README's blocks ------------------------------------------------------

# The text of block NAME in the README (between its fences).
readme_block() {
    awk -v name="$1" '
        $0 ~ "^<!-- readme_figures " name "[ :]" { found = 1; next }
        found == 1 && /^```/ { found = 2; next }
        found == 2 && /^```/ { exit }
        found == 2 { print }' "$readme"
}

out=$(mktemp -d /tmp/shs-readme.XXXXXX)
trap 'rm -rf "$out"' EXIT
fail=0
for b in $blocks; do
    name=${b//_/-}
    if ! grep -q "^<!-- readme_figures $name[ :]" "$readme"; then
        echo "readme_figures.sh: error: $readme has no block '<!-- readme_figures $name ... -->'" >&2
        exit 1
    fi
    "gen_$b" > "$out/$name.new"
    if [ "$mode" = update ]; then
        awk -v name="$name" -v new="$out/$name.new" '
            $0 ~ "^<!-- readme_figures " name "[ :]" { print; found = 1; next }
            found == 1 && /^```/ { print; while ((getline l < new) > 0) print l; found = 2; next }
            found == 2 && /^```/ { print; found = 0; next }
            found == 2 { next }
            { print }' "$readme" > "$out/readme" && cat "$out/readme" > "$readme"
        echo "updated $name"
        continue
    fi
    readme_block "$name" | machine_free > "$out/$name.readme"
    machine_free < "$out/$name.new" > "$out/$name.now"
    if ! diff -u "$out/$name.readme" "$out/$name.now" > "$out/$name.diff"; then
        echo "readme_figures.sh: block '$name' of $readme differs from what the command prints now" \
             "(bash tests/readme_figures.sh update rewrites it):"
        sed 's/^/  /' "$out/$name.diff"
        fail=1
    fi
done
[ "$mode" = check ] && [ $fail -eq 0 ] && echo "readme figures: $(echo $blocks | wc -w) blocks of $readme match their commands"
exit $fail
