/* nccl_tables.h - the constants of NCCL's tuning model, written once for the
 * alpha-beta model (net_alpha_beta.c), the NCCL model (nccl_model.c) and the
 * GPU presets (time/gpu_preset.c). Internal to the library.
 *
 * Source: NCCL 2.20.3 (NVIDIA/nccl commit b6475625, makefiles/version.mk
 * 2.20.3), src/graph/tuning.cc: baseLat, hwLat, llMaxBws,
 * perChMaxRingLL128Bws, perChMaxTreeLL128Bws, perChMaxTreeBws and
 * treeCorrectionFactor, indexed as there; latencies in seconds (the
 * file's microseconds written as e-6 literals), bandwidths in GB/s (1e9 B/s).
 * src/graph/topo.h: the per-link NVLink bandwidths NCCL assumes.
 * What it is not: the model that combines them (nccl_model.c).
 */
#ifndef SHARDSIM_NET_NCCL_TABLES_H
#define SHARDSIM_NET_NCCL_TABLES_H

/* algorithms and protocols in tuning.cc's order (only the two NCCL runs
 * without CollNet or NVLink SHARP) */
enum { SHS__NCCL_TREE = 0, SHS__NCCL_RING = 1, SHS__NCCL_NUM_ALGOS = 2 };
enum { SHS__NCCL_LL = 0, SHS__NCCL_LL128 = 1, SHS__NCCL_SIMPLE = 2, SHS__NCCL_NUM_PROTOS = 3 };
/* hardware rows of hwLat */
enum { SHS__NCCL_HW_NVLINK = 0, SHS__NCCL_HW_PCI = 1, SHS__NCCL_HW_NET = 2 };
/* compute-capability rows of the bandwidth caps */
enum { SHS__NCCL_VOLTA = 0, SHS__NCCL_AMPERE = 1, SHS__NCCL_HOPPER = 2 };

/* baseLat[algo][proto], seconds per call */
extern const double shs__nccl_base_lat[SHS__NCCL_NUM_ALGOS][SHS__NCCL_NUM_PROTOS];
/* hwLat[hw][algo][proto], seconds per ring step or tree level */
extern const double shs__nccl_hw_lat[3][SHS__NCCL_NUM_ALGOS][SHS__NCCL_NUM_PROTOS];
/* llMaxBws[cc or cpu row][nodes index: 1, 2, more], GB/s */
extern const double shs__nccl_ll_max_bw[3][3];
/* per-channel caps [cc][nodes index], GB/s */
extern const double shs__nccl_ring_ll128_max_bw[3][3];
extern const double shs__nccl_tree_ll128_max_bw[3][3];
extern const double shs__nccl_tree_max_bw[3][3];
/* treeCorrectionFactor[proto][log2(bytes / 64)], 23 powers of two, 64 B .. 256 MB */
extern const double shs__nccl_tree_correction[SHS__NCCL_NUM_PROTOS][23];

/* topo.h: GB/s of one NVLink as NCCL counts it (SM80_NVLINK_BW, SM90_NVLINK_BW) */
#define SHS__NCCL_SM80_NVLINK_BW 20.0
#define SHS__NCCL_SM90_NVLINK_BW 20.6

#endif
