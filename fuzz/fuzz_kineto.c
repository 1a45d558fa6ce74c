/* fuzz_kineto.c - libFuzzer target: the Kineto (PyTorch profiler) JSON reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_KINETO, "fuzz-input.json")
