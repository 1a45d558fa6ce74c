/* fuzz_chakra.c - libFuzzer target: the Chakra ET protobuf reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_CHAKRA, "fuzz-input.1.et")
