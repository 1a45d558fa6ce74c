/* fuzz_flight.c - libFuzzer target: the Flight Recorder JSON dump reader on arbitrary bytes
 * (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_FLIGHT, "fuzz-input.json")
