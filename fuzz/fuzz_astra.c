/* fuzz_astra.c - libFuzzer target: the ASTRA-sim 1.0 text workload reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_ASTRA, "fuzz-input.txt")
