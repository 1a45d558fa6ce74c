#!/bin/sh
# run_fuzz.sh - run every fuzz target for a bounded time and summarize
# (called by `make fuzz`; see README "Fuzzing the importers").
#
# usage: fuzz/run_fuzz.sh FUZZ_DIR SECONDS SHARED_DIR TARGET...
#   FUZZ_DIR    where `make fuzz` put the binaries (FUZZ_DIR/fuzz_<fmt>);
#               corpora grow in FUZZ_DIR/corpus/<fmt>, crashes land in
#               FUZZ_DIR/artifacts/, logs in FUZZ_DIR/logs/
#   SECONDS     -max_total_time per target
#   SHARED_DIR  ../shared: small real traces (<= 64 KiB) are copied from
#               it into the corpus at run time (never into the repository)
# Seeds: fuzz/seeds/<fmt>/ (written for this project), traces/cases and
# traces/recorded (shardsim's own), and SHARED_DIR/traces where present.
# Limits: -rss_limit_mb=2048, -malloc_limit_mb=256 (one allocation above it
# is a finding: importers must refuse absurd sizes, not allocate them),
# -timeout=5 per input, -max_len=65536.
# Exit: 0 no findings, 1 a target crashed, leaked, hung or ran out of memory.
# What it is not: part of `make test` (libFuzzer needs clang; runs are
# random, so they are a search, not a regression test).
set -u
dir=$1; secs=$2; shared=$3; shift 3
mkdir -p "$dir/artifacts" "$dir/logs"

# copy_small DEST FILE...: copy the readable files of at most 64 KiB
copy_small() {
    dest=$1; shift
    for f in "$@"; do
        [ -f "$f" ] && [ "$(wc -c < "$f")" -le 65536 ] || continue
        cp "$f" "$dest/$(echo "$f" | tr '/' '_' | sed 's/^[._]*//')"
    done
}

seed() {
    fmt=$1; c=$dir/corpus/$fmt
    mkdir -p "$c"
    copy_small "$c" fuzz/seeds/"$fmt"/*
    case $fmt in
    shardsim) copy_small "$c" traces/cases/*.trace traces/recorded/ddp/rank0.trace traces/recorded/zero3/rank2.trace ;;
    nccl)     copy_small "$c" "$shared"/traces/nccl-log/*.log ;;
    chakra)   copy_small "$c" "$shared"/traces/chakra-et/*/*.et "$shared"/traces/chakra-et/microbench/*/*.et ;;
    astra)    copy_small "$c" "$shared"/traces/astra-sim/text-workloads/*.txt ;;
    kineto)   copy_small "$c" traces/cases/kineto-*/*.json ;;
    flight)   copy_small "$c" traces/cases/flight-*/*.json ;;
    pytorch_et) ;;  # the real ETs are 200 KiB - 850 KiB: hand-written seeds only
    archive)  ;;    # hand-written tar seeds (fuzz/seeds/archive)
    esac
}

status=0
summary=""
for target in "$@"; do
    fmt=${target#fuzz_}
    seed "$fmt"
    nseeds=$(ls "$dir/corpus/$fmt" | wc -l)
    log=$dir/logs/$fmt.log
    echo "== $target: $secs s, corpus $dir/corpus/$fmt ($nseeds files)"
    "$dir/$target" -max_total_time="$secs" -rss_limit_mb=2048 -malloc_limit_mb=256 -timeout=5 -max_len=65536 \
        -print_final_stats=1 -artifact_prefix="$dir/artifacts/$fmt-" "$dir/corpus/$fmt" > "$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | sed 's/cov: //')
    ncorp=$(ls "$dir/corpus/$fmt" | wc -l)
    if [ $rc -eq 0 ]; then
        found="none"
    else
        status=1
        found=$(grep -m1 -E 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|runtime error|refused .* without naming' "$log" | cut -c1-120)
        [ -n "$found" ] || found="exit $rc"
        art=$(grep -o "Test unit written to [^ ]*" "$log" | tail -1 | sed 's/Test unit written to //')
        [ -n "$art" ] && found="$found ($art)"
        tail -40 "$log"
    fi
    summary="$summary$(printf '%-18s %12s %10s %8s %8s %8s  %s' "$target" "${execs:-?}" "${rate:-?}" "${cov:-?}" "$ncorp" "${rss:-?}" "$found")
"
done
echo
printf '%-18s %12s %10s %8s %8s %8s  %s\n' target executions exec/s cov corpus rss_mb findings
printf '%s' "$summary"
[ $status -eq 0 ] && echo "make fuzz: no findings" || echo "make fuzz: FINDINGS (logs in $dir/logs, inputs in $dir/artifacts)"
exit $status
