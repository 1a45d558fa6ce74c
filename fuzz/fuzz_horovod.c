/* fuzz_horovod.c - libFuzzer target: the Horovod timeline reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_HOROVOD, "fuzz-input.json")
