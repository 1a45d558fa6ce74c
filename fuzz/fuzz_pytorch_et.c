/* fuzz_pytorch_et.c - libFuzzer target: the PyTorch Execution Trace JSON reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_PYTORCH_ET, "fuzz-input.json")
