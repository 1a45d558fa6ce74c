# shardsim - GNU Make build.
#   make                 build/shardsim and build/libshardsim.a
#   make deps            install libcmocka-dev, libjansson-dev, libprotobuf-c-dev,
#                        protobuf-c-compiler, zlib1g-dev, openmpi-bin and libopenmpi-dev
#                        if missing (apt-get)
#   make bench           benchmarks: ratios measured in one run, not timed tests
#   make test            build and run every tests/<layer>/test_*.c (cmocka)
#   make test SAN=address | SAN=thread   same under ASan+UBSan / TSan
#   make test-full       every training feature x world sizes {1,2,3,5,8} (a few minutes)
#   make readme-figures  rerun the commands of the README's output blocks and rewrite them
# Never add -ffast-math or -Ofast: bit-exactness depends on IEEE semantics.

CC      ?= gcc
SAN     ?=
# The shared data the tests read: $(SHARED), or $SHS_SHARED_DIR if set, else ../shared.
SHARED  ?= $(if $(SHS_SHARED_DIR),$(SHS_SHARED_DIR),$(abspath ../shared))

BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -g -O2 -Wall -Wextra -Wshadow \
               -Wno-unused-parameter -ffp-contract=off -pthread
LDLIBS  := -lm -pthread

# BUILDROOT: where objects go (override to build several trees side by side).
BUILDROOT ?= build
ifeq ($(SAN),)
  BUILD := $(BUILDROOT)
  OMP   := $(shell echo 'int main(void){return 0;}' | $(CC) -fopenmp -x c - -o /dev/null 2>/dev/null && echo -fopenmp)
else ifeq ($(SAN),address)
  BUILD := $(BUILDROOT)/san-address
  OMP   := -fopenmp
  BASE_CFLAGS += -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer
  LDLIBS += -fsanitize=address,undefined
else ifeq ($(SAN),thread)
  # libgomp is not TSan-instrumented: OpenMP is off under TSan (kernels run serially).
  BUILD := $(BUILDROOT)/san-thread
  OMP   :=
  BASE_CFLAGS += -fsanitize=thread -fno-omit-frame-pointer
  LDLIBS += -fsanitize=thread
else
  $(error SAN must be empty, 'address' or 'thread')
endif

# Optional libraries: each is built in only when a probe program that includes
# its header and calls into it really compiles AND links (a bare preprocessor
# run is not enough: it once passed on every machine). Without one, the build
# still succeeds, prints what it skipped, and the features that need it fail at
# run time naming the package (src/core/features.c: shs_feature_missing); make
# check-nolibs builds such a tree and checks the refusals.
# HASH: a literal '#' that every GNU Make version keeps inside $(shell ...).
HASH := \#
# $(call shs_probe,HEADERS,CALL,CFLAGS,LIBS): "yes" when a program that
#   includes each of HEADERS (space-separated) and runs CALL in main compiles and links.
shs_probe = $(shell printf '%b' '$(foreach h,$(1),$(HASH)include <$(h)>\n)int main(void){ $(2); return 0; }\n' | \
              $(CC) $(3) -x c - -o /dev/null $(4) >/dev/null 2>&1 && echo yes)

# jansson: bench/compare --format json and the JSON trace importers.
JANSSON := $(call shs_probe,jansson.h,json_decref(json_object()),,-ljansson)
ifeq ($(JANSSON),yes)
  BASE_CFLAGS += -DSHS_HAVE_JANSSON
  LDLIBS += -ljansson
endif

# protobuf-c: Chakra ET import/export (needs protoc-c too, to generate the C).
PROTOC_C   := $(shell command -v protoc-c 2>/dev/null)
PROTOBUF_C := $(if $(PROTOC_C),$(call shs_probe,protobuf-c/protobuf-c.h,protobuf_c_version(),,-lprotobuf-c),)
GEN_DIR    := $(BUILD)/gen
ifeq ($(PROTOBUF_C),yes)
  BASE_CFLAGS += -DSHS_HAVE_PROTOBUF_C -I$(GEN_DIR)
  LDLIBS += -lprotobuf-c
  GEN_OBJS := $(BUILD)/obj/gen/et_def.pb-c.o
endif

# zlib: gzip-compressed trace inputs (a .json.gz is inflated in memory, then read as usual).
ZLIB := $(call shs_probe,zlib.h,inflateEnd((z_streamp)0),,-lz)
ifeq ($(ZLIB),yes)
  BASE_CFLAGS += -DSHS_HAVE_ZLIB
  LDLIBS += -lz
endif

# OpenMPI: the "mpi" communicator (comm_mpi.h) and `train --backend mpi`; needs
# mpicc, mpirun, and mpi.h that compiles and links. Not under SAN=thread:
# OpenMPI is not TSan-instrumented, so the MPI tests skip there.
ifneq ($(SAN),thread)
  MPICC  := $(shell command -v mpicc 2>/dev/null)
  MPIRUN := $(shell command -v mpirun 2>/dev/null)
endif
ifneq ($(and $(MPICC),$(MPIRUN)),)
  MPI_CFLAGS := $(shell $(MPICC) --showme:compile 2>/dev/null)
  MPI_LIBS   := $(shell $(MPICC) --showme:link 2>/dev/null)
  MPI := $(call shs_probe,mpi.h,MPI_Initialized((int *)0),$(MPI_CFLAGS),$(MPI_LIBS))
endif
ifeq ($(MPI),yes)
  BASE_CFLAGS += -DSHS_HAVE_MPI $(MPI_CFLAGS) -DSHS_MPIRUN='"$(MPIRUN)"'
  LDLIBS += $(MPI_LIBS)
endif

# cmocka: the test binaries only (never the product). `make test` without it
# stops with one line naming the package.
CMOCKA := $(call shs_probe,stdarg.h stddef.h stdint.h setjmp.h cmocka.h,(void)&_cmocka_run_group_tests,,-lcmocka)

CFLAGS += $(BASE_CFLAGS) $(OMP) -DSHS_SOURCE_DIR='"$(CURDIR)"' -DSHS_SHARED_DIR='"$(SHARED)"' -DSHS_BIN_PATH='"$(abspath $(BUILD))/shardsim"'
LDLIBS += $(OMP)

# Sources are found per folder (README "Where things are"). The library's
# private headers are reached as "folder/name.h" from src/ (-Isrc): only the
# library and the white-box tests see them; sim/ sees the public headers and
# its own (-Isim). src/device/cuda and src/comm/cuda build only with nvcc.
CUDA_DIRS := src/device/cuda/ src/comm/cuda/
LIB_SRCS  := $(filter-out $(addsuffix %,$(CUDA_DIRS)),$(shell find src -name '*.c' | sort))
LIB_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRCS)) $(GEN_OBJS)
# benchmarks (sim/bench): part of the program and of the tests that check them, not of the library
BENCH_SRCS := $(wildcard sim/bench/*.c)
BENCH_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(BENCH_SRCS))
SIM_SRCS  := $(wildcard sim/*.c)
SIM_OBJS  := $(patsubst %.c,$(BUILD)/obj/%.o,$(SIM_SRCS)) $(BENCH_OBJS)
# Tests sit in folders that mirror src/ (tests/core, tests/comm, ...; tests/cli
# drives the program); one binary per test_*.c, under $(BUILD)/tests/<folder>/.
# Every other .c under tests/ is a helper linked into each test binary.
# tests/gpu/ has its own rules (below).
TEST_SRCS := $(shell find tests -name 'test_*.c' -not -path 'tests/gpu/*' | sort)
TEST_BINS := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRCS))
# Test programs of an optional library are not built without it (a binary
# never passes by skipping): `make test` names each one it leaves out, and
# the program itself refuses to compile without its library (#error).
ifneq ($(MPI),yes)
  TEST_BINS := $(filter-out $(BUILD)/tests/comm/test_mpi,$(TEST_BINS))
  TESTS_LEFT_OUT += "test_mpi: built without MPI ($(if $(filter thread,$(SAN)),SAN=thread: OpenMPI is not TSan-instrumented,mpicc/mpirun not found; make deps installs OpenMPI))"
endif
ifneq ($(JANSSON),yes)
  TEST_BINS := $(filter-out $(BUILD)/tests/trace/test_astra_timing,$(TEST_BINS))
  TESTS_LEFT_OUT += "test_astra_timing: built without jansson (ASTRA-sim system JSON; make deps installs it)"
endif
ifneq ($(and $(JANSSON),$(PROTOBUF_C)),yes)
  TEST_BINS := $(filter-out $(BUILD)/tests/trace/test_trace_import% $(BUILD)/tests/trace/test_trace_mutations,$(TEST_BINS))
  TESTS_LEFT_OUT += "test_trace_import, test_trace_import_refusals, test_trace_mutations: built without jansson or protobuf-c (make deps installs them)"
endif
ifneq ($(and $(PROTOBUF_C),$(ZLIB)),yes)
  TEST_BINS := $(filter-out $(BUILD)/tests/cli/test_output_paths,$(TEST_BINS))
  TESTS_LEFT_OUT += "test_output_paths: built without protobuf-c or zlib (its inputs are Chakra and gzip traces; make deps installs them)"
endif
ifneq ($(and $(JANSSON),$(ZLIB)),yes)
  TEST_BINS := $(filter-out $(BUILD)/tests/trace/test_trace_gzip,$(TEST_BINS))
  TESTS_LEFT_OUT += "test_trace_gzip: built without jansson or zlib (make deps installs them)"
endif
TEST_HELPERS := $(shell find tests -name '*.c' -not -name 'test_*' -not -path 'tests/gpu/*' | sort)
TEST_HELPER_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_HELPERS))
# test objects and helpers are kept, not removed as intermediates (make test ended on an "rm" line)
.SECONDARY: $(TEST_HELPER_OBJS) $(patsubst %.c,$(BUILD)/obj/%.o,$(TEST_SRCS))
# every object and test records the headers it read (-MMD -MP): a changed
# header rebuilds exactly what includes it
DEPFLAGS  := -MMD -MP
$(BUILD)/obj/src/%.o: PRIV_INC := -Isrc
$(BUILD)/obj/sim/%.o: PRIV_INC := -Isim
# the benchmarks time library internals (chunking, the fused copy): white-box, as tests are
$(BUILD)/obj/sim/bench/%.o: PRIV_INC := -Isim -Isrc
$(BUILD)/obj/tests/%.o: PRIV_INC := -Isrc -Isim -Itests -I$(GEN_DIR)

comma := ,
# ---- CUDA backend (src/device/cuda/, src/comm/cuda/, tests/gpu/) -----------------------
# Built when nvcc is on PATH or in CUDA's default prefix (/usr/local/cuda/bin);
# the NCCL communicator when nccl.h and libnccl sit beside CUDA (or in the
# system paths). Never under SAN=: the CUDA runtime and the sanitizers do not
# mix (ASan's shadow memory vs the driver's mappings, TSan vs the runtime's
# uninstrumented threads), so sanitizer builds are exactly the CPU build.
# Kernels compile with --fmad=false and IEEE div/sqrt (kernels.cu: bit-exact
# with the CPU backend where no libm call is involved). CUDA_ARCH picks the
# GPUs: A100 (sm_80), H100/H200 (sm_90), plus sm_90 PTX for newer ones.
ifeq ($(SAN),)
  NVCC := $(or $(shell command -v nvcc 2>/dev/null),$(wildcard /usr/local/cuda/bin/nvcc))
endif
CUDA_ARCH ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
# nvcc may be a wrapper script elsewhere on PATH (e.g. /usr/local/bin/nvcc that
# execs /usr/local/cuda-13.0/bin/nvcc), so the toolkit root is not always the
# wrapper's parent: take the first of $CUDA_HOME, the root nvcc itself reports
# (its --dryrun "TOP=" line), nvcc's parent and /usr/local/cuda that really has
# cuda_runtime_api.h. None has it: no CUDA backend, and the status line says why.
ifneq ($(NVCC),)
  CUDA_ROOTS  := $(CUDA_HOME) \
                 $(shell $(NVCC) --dryrun -c -x cu /dev/null -o /dev/null 2>&1 | sed -n 's/^$(HASH)\$$ TOP=//p') \
                 $(dir $(NVCC)).. /usr/local/cuda
  CUDA_HOME   := $(abspath $(firstword $(foreach d,$(CUDA_ROOTS),$(if $(wildcard $(d)/include/cuda_runtime_api.h),$(d)))))
  ifeq ($(CUDA_HOME),)
    NVCC_WITHOUT_HEADERS := $(NVCC)
    NVCC :=
  endif
endif
ifneq ($(NVCC),)
  CUDA_INC    := $(CUDA_HOME)/include
  CUDA_LIBDIR := $(firstword $(wildcard $(CUDA_HOME)/lib64 $(CUDA_HOME)/targets/x86_64-linux/lib $(CUDA_HOME)/lib))
  NCCL := $(if $(wildcard $(CUDA_INC)/nccl.h /usr/include/nccl.h),$(if $(wildcard $(CUDA_LIBDIR)/libnccl.so* /usr/lib/*/libnccl.so* /usr/lib64/libnccl.so*),yes))
  NVCCFLAGS := -O2 -g -std=c++17 --fmad=false -prec-div=true -prec-sqrt=true -ftz=false \
               -Iinclude -Isrc $(CUDA_ARCH) -Xcompiler -Wall
  CUDA_OBJS := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard $(addsuffix *.c,$(CUDA_DIRS)))) \
               $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(wildcard $(addsuffix *.cu,$(CUDA_DIRS))))
  LIB_OBJS += $(CUDA_OBJS)
  CFLAGS += -DSHS_HAVE_CUDA -I$(CUDA_INC) $(if $(NCCL),-DSHS_HAVE_NCCL)
  LDLIBS += -L$(CUDA_LIBDIR) -Wl,-rpath,$(CUDA_LIBDIR) -lcudart $(if $(NCCL),-lnccl) -lstdc++
endif
GPU_TEST_SRCS := $(wildcard tests/gpu/test_*.c)
GPU_TEST_BINS := $(patsubst tests/gpu/%.c,$(BUILD)/tests/gpu/%,$(GPU_TEST_SRCS))
GPU_TEST_HELPERS := $(filter-out tests/gpu/test_%.c,$(wildcard tests/gpu/*.c))

LIB := $(BUILD)/libshardsim.a
BIN := $(BUILD)/shardsim

.PHONY: all test run-tests test-full bench clean deps
all: $(BIN) $(LIB)
	@echo "$(if $(OMP),✓ OpenMP,✗ OpenMP off)$(if $(SAN), (SAN=$(SAN)),)"
	@echo "$(if $(JANSSON),✓ jansson: bench --format json and JSON trace import,✗ jansson not found: bench --format json and JSON trace import disabled (make deps installs it))"
	@echo "$(if $(PROTOBUF_C),✓ protobuf-c: Chakra ET import/export,✗ protobuf-c not found: Chakra ET import/export disabled (make deps installs it))"
	@echo "$(if $(ZLIB),✓ zlib: gzip-compressed trace inputs,✗ zlib not found: gzip-compressed trace inputs refused (make deps installs it))"
	@echo "$(if $(MPI),✓ mpi found: train --backend mpi (mpirun),✗ mpi not found: skipping MPI backend$(if $(filter thread,$(SAN)), (SAN=thread: OpenMPI is not TSan-instrumented), (make deps installs OpenMPI)))"

# The flags a build tree was made with: when they change (a library found or
# lost, NVCC= given or not), everything in it is rebuilt instead of mixed.
BUILD_STAMP := $(BUILD)/build-flags
BUILD_FLAGS := $(CC) $(CFLAGS) $(LDLIBS) $(NVCC) $(GEN_OBJS) $(CUDA_OBJS)
ifneq ($(BUILD_FLAGS),$(file <$(BUILD_STAMP)))
  $(shell mkdir -p $(BUILD) && rm -f $(BUILD_STAMP))
endif
$(BUILD_STAMP):
	@mkdir -p $(dir $@)
	$(file >$@,$(BUILD_FLAGS))

$(BUILD)/obj/%.o: %.c $(BUILD_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(PRIV_INC) $(DEPFLAGS) -c $< -o $@

# Chakra ET: C generated from proto/et_def.proto at build time.
$(GEN_DIR)/et_def.pb-c.c $(GEN_DIR)/et_def.pb-c.h: proto/et_def.proto
	@mkdir -p $(GEN_DIR)
	$(PROTOC_C) --c_out=$(GEN_DIR) --proto_path=proto proto/et_def.proto

$(BUILD)/obj/gen/et_def.pb-c.o: $(GEN_DIR)/et_def.pb-c.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -w -c $< -o $@

ifeq ($(PROTOBUF_C),yes)
$(BUILD)/obj/src/trace/import/trace_chakra.o $(BUILD)/obj/src/trace/export/trace_export_chakra.o \
  $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/trace/test_trace_import*.c)): $(GEN_DIR)/et_def.pb-c.h
endif

$(LIB): $(LIB_OBJS) $(BUILD_STAMP)
	@rm -f $@
	ar rcs $@ $(filter %.o,$^)

$(BIN): $(SIM_OBJS) $(LIB)
	$(CC) $(CFLAGS) -o $@ $(SIM_OBJS) $(LIB) $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TEST_HELPER_OBJS) $(BENCH_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(TEST_HELPER_OBJS) $(BENCH_OBJS) $(LIB) -lcmocka $(LDLIBS)

# `make deps test` must build with what deps just installed, but this make
# detected the libraries when it started: the tests run in a fresh sub-make.
test:
	@$(MAKE) --no-print-directory run-tests

# The tests are cmocka programs: without it, one line says what to install.
ifneq ($(CMOCKA),yes)
$(TEST_BINS) $(GPU_TEST_BINS): need-cmocka
endif
.PHONY: need-cmocka
need-cmocka:
	@echo "✗ cmocka not found: the tests need libcmocka-dev (run make deps)"; exit 1

# The program the documentation checks run (tests/cli/test_readme_figures.c,
# test_help_examples.c): what the README and --help show does not depend on
# the build, so under SAN= they run the plain build's program (built here
# first, a no-op when it is current) instead of repeating minutes of
# training under a sanitizer; the sanitizers run those code paths in the
# other CLI tests.
DOCS_BIN := $(abspath $(BUILDROOT))/shardsim
$(BUILD)/obj/tests/cli/test_readme_figures.o $(BUILD)/obj/tests/cli/test_help_examples.o: \
  CFLAGS += -DSHS_DOCS_BIN_PATH='"$(DOCS_BIN)"'
.PHONY: docs-bin
docs-bin:
	@$(MAKE) --no-print-directory SAN= $(BUILDROOT)/shardsim

# Runs every test binary, keeps going past failures, fails if any failed.
run-tests: $(TEST_BINS) $(BIN) $(if $(SAN),docs-bin)
	@fail=0; for t in $(TEST_BINS); do \
	  echo "== $$t"; \
	  if ! SHS_SHARED_DIR=$(SHARED) $$t; then fail=1; echo "FAILED: $$t"; fi; \
	done; \
	for l in $(TESTS_LEFT_OUT); do echo "✗ not built, not run: $$l"; done; \
	if [ $$fail -ne 0 ]; then echo "some tests FAILED"; exit 1; fi; \
	echo "all $(words $(TEST_BINS)) test binaries built here passed$(if $(TESTS_LEFT_OUT), (the ones left out are named above))"

# The full cross-product of the training features (accumulation, clipping,
# replicated units, alignment, fp16, activation checkpointing) x world sizes {1,2,3,5,8}
# (make test runs a representative part of it).
test-full:
	@SHS_TEST_FULL=1 $(MAKE) --no-print-directory test

# ---- Fuzz targets (the trace importers; fuzz/) ------------------------------
# make fuzz: one libFuzzer target per trace importer (fuzz/fuzz_<format>.c),
# built with clang -fsanitize=fuzzer,address,undefined into $(BUILDROOT)/fuzz
# and run FUZZ_TIME seconds each by fuzz/run_fuzz.sh (seeds, limits, summary).
# Needs clang with libFuzzer (Debian: apt-get install clang; make deps does not
# install it). Not part of make test. Independent of SAN=.
FUZZ_CC   ?= clang
FUZZ_TIME ?= 20
FUZZ_DIR  := $(BUILDROOT)/fuzz
FUZZ_TARGETS := $(patsubst fuzz/%.c,%,$(wildcard fuzz/fuzz_*.c))
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Ifuzz -g -O1 -fno-omit-frame-pointer -pthread \
               -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -MMD -MP \
               $(if $(JANSSON),-DSHS_HAVE_JANSSON) $(if $(PROTOBUF_C),-DSHS_HAVE_PROTOBUF_C -I$(FUZZ_DIR)/gen) \
               $(if $(ZLIB),-DSHS_HAVE_ZLIB)
FUZZ_LIBS := $(if $(JANSSON),-ljansson) $(if $(PROTOBUF_C),-lprotobuf-c) $(if $(ZLIB),-lz) -lm -pthread
FUZZ_OBJS := $(patsubst src/%.c,$(FUZZ_DIR)/obj/%.o,$(LIB_SRCS)) $(if $(PROTOBUF_C),$(FUZZ_DIR)/obj/et_def.pb-c.o)

.PHONY: fuzz fuzz-build
fuzz:
	@command -v $(FUZZ_CC) >/dev/null 2>&1 || { echo "✗ $(FUZZ_CC) not found: make fuzz needs clang with libFuzzer (Debian: apt-get install clang)"; exit 1; }
	@printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return 0; }\n' | \
	  $(FUZZ_CC) -fsanitize=fuzzer -x c - -o /dev/null 2>/dev/null || { echo "✗ $(FUZZ_CC) cannot link -fsanitize=fuzzer (libFuzzer missing; Debian: apt-get install clang)"; exit 1; }
	@echo "✓ $(FUZZ_CC) with libFuzzer$(if $(JANSSON),, (no jansson: JSON readers only refuse))$(if $(PROTOBUF_C),, (no protobuf-c: Chakra reader only refuses))"
	@$(MAKE) --no-print-directory fuzz-build
	@fuzz/run_fuzz.sh $(FUZZ_DIR) $(FUZZ_TIME) $(SHARED) $(FUZZ_TARGETS)

fuzz-build: $(addprefix $(FUZZ_DIR)/,$(FUZZ_TARGETS))

$(FUZZ_DIR)/gen/et_def.pb-c.c $(FUZZ_DIR)/gen/et_def.pb-c.h: proto/et_def.proto
	@mkdir -p $(FUZZ_DIR)/gen
	$(PROTOC_C) --c_out=$(FUZZ_DIR)/gen --proto_path=proto proto/et_def.proto

$(FUZZ_DIR)/obj/et_def.pb-c.o: $(FUZZ_DIR)/gen/et_def.pb-c.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -w -c $< -o $@

$(FUZZ_DIR)/obj/%.o: src/%.c $(if $(PROTOBUF_C),$(FUZZ_DIR)/gen/et_def.pb-c.h)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/libshardsim-fuzz.a: $(FUZZ_OBJS)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_DIR)/fuzz_%: fuzz/fuzz_%.c fuzz/fuzz_common.h $(FUZZ_DIR)/libshardsim-fuzz.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -o $@ $< $(FUZZ_DIR)/libshardsim-fuzz.a $(FUZZ_LIBS)

bench: $(BIN)
	$(BIN) bench

# The product's outputs (losses, weights, compare JSON, a trace) against the
# sums recorded in tests/golden/: a change that must not change them reruns
# this; one that changes them on purpose re-records (same_outputs.sh record).
.PHONY: same-outputs
same-outputs: $(BIN)
	@bash tests/same_outputs.sh check

# The README's output blocks (the main job, compare's tables and timing)
# rerun: readme-figures rewrites them, readme-check compares (machine-
# dependent timings as placeholders); tests/cli/test_readme_figures.c runs
# the check in make test.
.PHONY: readme-figures readme-check
readme-figures: $(BIN)
	@SHARDSIM=$(BIN) bash tests/readme_figures.sh update
readme-check: $(BIN)
	@SHARDSIM=$(BIN) bash tests/readme_figures.sh check

# The Llama against PyTorch (tests/fidelity/torch_llama_check.py): loss and
# one AdamW step. Needs Debian's python3-torch in the system python3
# (apt-get install python3-torch); not part of `make test`, run by CI.
.PHONY: torch-check
torch-check: $(BIN)
	@/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "torch-check needs Debian's python3-torch: apt-get install python3-torch" >&2; exit 1; }
	SHARDSIM=$(BIN) /usr/bin/python3 tests/fidelity/torch_llama_check.py

# OpenMPI's own MPI_Allreduce on this machine, in the same columns: the
# thread collectives' "tuned OpenMPI" yardstick (shared memory through vader, single-copy off,
# MALLOC_MMAP_MAX_=0), at N = 2, 4, 8. Needs MPI; not part of `make bench`.
.PHONY: bench-openmpi
bench-openmpi:
ifeq ($(MPI),yes)
	@mkdir -p $(BUILD)
	$(MPICC) -O2 -o $(BUILD)/ref_mpi_allreduce sim/ref/mpi_allreduce.c
	@for n in 2 4 8; do \
	  MALLOC_MMAP_MAX_=0 $(MPIRUN) $$( [ "$$(id -u)" = 0 ] && echo --allow-run-as-root) --oversubscribe \
	    --bind-to none --mca btl self,vader --mca btl_vader_single_copy_mechanism none \
	    -np $$n $(BUILD)/ref_mpi_allreduce 1024 67108864 4 0.2 || exit 1; \
	done
else
	@echo "make bench-openmpi: needs OpenMPI (mpicc and mpi.h not found; make deps installs them)"; exit 1
endif

# A tree built as if no optional library were installed ($(BUILDROOT)/nolibs:
# NVCC= JANSSON= PROTOBUF_C= ZLIB= MPI= override the probes): each feature that needs
# one refuses with the Debian package(s) to install. CASES: expected exit
# code, text the message must hold, then the arguments.
NOLIBS := $(BUILDROOT)/nolibs
NOLIBS_CASES := \
  "2|needs libjansson-dev|bench --format json" \
  "2|needs libjansson-dev|compare --format json" \
  "2|needs libopenmpi-dev and openmpi-bin|train --backend mpi" \
  "1|needs libprotobuf-c-dev and protobuf-c-compiler|replay traces/cases/skip-op.trace --check-only --export-chakra $(NOLIBS)/x" \
  "1|needs zlib1g-dev|replay $(NOLIBS)/skip-op.trace.gz --check-only" \
  "1|nvidia-cuda-toolkit|train --backend cuda --steps 1"
.PHONY: check-nolibs
check-nolibs:
	@$(MAKE) --no-print-directory NVCC= JANSSON= PROTOBUF_C= ZLIB= MPI= SAN= BUILDROOT=$(NOLIBS) $(NOLIBS)/shardsim
	@gzip -c traces/cases/skip-op.trace > $(NOLIBS)/skip-op.trace.gz
	@fail=0; for c in $(NOLIBS_CASES); do \
	  code=$${c%%|*}; rest=$${c#*|}; want=$${rest%%|*}; args=$${rest#*|}; \
	  err=$$($(NOLIBS)/shardsim $$args 2>&1 >/dev/null); rc=$$?; \
	  if [ $$rc -eq $$code ] && printf '%s' "$$err" | grep -qF "$$want"; then echo "✓ shardsim $$args: exit $$rc, $$want"; \
	  else echo "✗ shardsim $$args: want exit $$code and '$$want', got exit $$rc: $$err"; fail=1; fi; \
	done; exit $$fail

# make deps: install on Debian/Ubuntu what the tests use. Each optional
# library's Debian packages, one line each (tests/fresh_machine.sh reads the
# DEPS_PKGS_ lines); a library the probes above did not find has its packages
# installed: the build's own test, so deps installs exactly what it would miss.
DEPS_PKGS_CMOCKA     := libcmocka-dev
DEPS_PKGS_JANSSON    := libjansson-dev
DEPS_PKGS_PROTOBUF_C := libprotobuf-c-dev protobuf-c-compiler
DEPS_PKGS_ZLIB       := zlib1g-dev
DEPS_PKGS_MPI        := openmpi-bin libopenmpi-dev
deps_line = $(if $($(1)),✓ $(2) found,✗ $(2) not found: installing $(DEPS_PKGS_$(1)))
DEPS_MISSING := $(foreach l,CMOCKA JANSSON PROTOBUF_C ZLIB MPI,$(if $($(l)),,$(DEPS_PKGS_$(l))))
deps:
	@echo "$(call deps_line,CMOCKA,cmocka)"
	@echo "$(call deps_line,JANSSON,jansson)"
	@echo "$(call deps_line,PROTOBUF_C,protobuf-c)"
	@echo "$(call deps_line,ZLIB,zlib)"
	@echo "$(call deps_line,MPI,mpi)"
	@missing="$(strip $(DEPS_MISSING))"; \
	if [ -n "$$missing" ]; then SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; fi

clean:
	rm -rf $(BUILDROOT)

# ---- CUDA backend: status line, nvcc rule, GPU tests (variables above) ------
.PHONY: cuda-status build-gpu-tests test-gpu
all: cuda-status
cuda-status: $(BIN) $(LIB)
	@echo "$(if $(NVCC),✓ nvcc found: building the CUDA backend ($(NVCC)$(comma) toolkit $(CUDA_HOME)),✗ nvcc not found$(if $(NVCC_WITHOUT_HEADERS), usable ($(NVCC_WITHOUT_HEADERS) has no cuda_runtime_api.h beside it; set CUDA_HOME)): skipping CUDA backend$(if $(SAN), (SAN=$(SAN): sanitizer builds never include it),))"
	@echo "$(if $(NCCL),✓ NCCL found: building the NCCL communicator,✗ NCCL not found: skipping the NCCL communicator)"

$(BUILD)/obj/%.cu.o: %.cu $(BUILD_STAMP)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/gpu/%: tests/gpu/%.c $(GPU_TEST_HELPERS) $(TEST_HELPER_OBJS) $(BENCH_OBJS) $(wildcard tests/gpu/*.h) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -Isrc -Isim -Itests -Itests/gpu -o $@ $< $(GPU_TEST_HELPERS) $(TEST_HELPER_OBJS) $(BENCH_OBJS) $(LIB) -lcmocka $(LDLIBS)

# Compile and link the GPU tests (CI does this wherever nvcc exists; no GPU needed).
build-gpu-tests: cuda-status
ifeq ($(NVCC),)
	@echo "make build-gpu-tests: needs the CUDA backend (nvcc not found$(if $(SAN), or SAN= set),)"; exit 1
else
build-gpu-tests: $(GPU_TEST_BINS) $(BIN)
	@echo "GPU tests built: $(GPU_TEST_BINS)"
endif

# Run them (needs a GPU): every kernel vs the CPU backend, device-local
# collectives, DDP vs ZeRO-1/2/3 bit for bit on one GPU, CPU vs CUDA loss.
test-gpu: build-gpu-tests
	@fail=0; for t in $(GPU_TEST_BINS); do \
	  echo "== $$t"; \
	  if ! SHS_SHARED_DIR=$(SHARED) $$t; then fail=1; echo "FAILED: $$t"; fi; \
	done; \
	if [ $$fail -ne 0 ]; then echo "some GPU tests FAILED"; exit 1; fi; echo "all GPU test binaries passed"

# the headers each object read (-MMD -MP above)
-include $(shell find $(BUILDROOT) -name '*.d' 2>/dev/null)
