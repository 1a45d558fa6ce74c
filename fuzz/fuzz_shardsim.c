/* fuzz_shardsim.c - libFuzzer target: shardsim's text trace reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_SHARDSIM, "fuzz-input.trace")
