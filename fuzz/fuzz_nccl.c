/* fuzz_nccl.c - libFuzzer target: the NCCL INFO log reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_NCCL, "fuzz-input.log")
