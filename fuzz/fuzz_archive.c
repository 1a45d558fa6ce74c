/* fuzz_archive.c - libFuzzer target: format detection and the tar archive
 * reader (a .tar of rank files, its members detected and read) on
 * arbitrary bytes (fuzz_common.h; built and run by `make fuzz`). */
#include "fuzz_common.h"

SHS_FUZZ_TARGET(SHS_TFMT_UNKNOWN, "fuzz-input.tar")
