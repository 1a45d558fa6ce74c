/* net_preset.c - the named networks of the alpha-beta model, ASTRA-sim
 * network files read into it, and the algorithm names (net.h).
 * What it is not: the time of a call (net_alpha_beta.c).
 */
#include "shardsim/net.h"

#include <stdio.h>
#include <string.h>

#include "core/names.h"
#include "net/nccl_tables.h"

#define ALGO_NAME(id, name) name,
static const char *const algo_names[] = {SHS_NET_ALGO_MAP(ALGO_NAME)};
#undef ALGO_NAME

const char *shs_net_algo_name(shs_net_algo_t a) { return shs__name_of(algo_names, SHS_NUM_ALGOS, (int)a, "invalid"); }

int shs_net_algo_parse(const char *name, shs_net_algo_t *out) {
    int k = shs__name_find(algo_names, SHS_NUM_ALGOS, name);
    if (k >= 0) *out = (shs_net_algo_t)k;
    return k >= 0 ? 0 : -1;
}

/* The Simple-protocol latencies of NCCL's tuning model (nccl_tables.h) for
 * intra-node links over NVLink (pci 0) or PCI (pci 1). */
void shs_net_set_nccl_simple_latency(shs_net_t *net, int pci) {
    int hw = pci ? SHS__NCCL_HW_PCI : SHS__NCCL_HW_NVLINK;
    net->intra_lat = shs__nccl_hw_lat[hw][SHS__NCCL_RING][SHS__NCCL_SIMPLE];
    net->inter_lat = shs__nccl_hw_lat[SHS__NCCL_HW_NET][SHS__NCCL_RING][SHS__NCCL_SIMPLE];
    net->base_lat = shs__nccl_base_lat[SHS__NCCL_RING][SHS__NCCL_SIMPLE];
    net->tree_base_lat = shs__nccl_base_lat[SHS__NCCL_TREE][SHS__NCCL_SIMPLE];
    net->tree_intra_lat = shs__nccl_hw_lat[hw][SHS__NCCL_TREE][SHS__NCCL_SIMPLE];
    net->tree_inter_lat = shs__nccl_hw_lat[SHS__NCCL_HW_NET][SHS__NCCL_TREE][SHS__NCCL_SIMPLE];
}

shs_status_t shs_net_preset(const char *name, shs_net_t *out) {
    /* bandwidths: ASTRA-sim's HGX-H100-validated.yml (400 GB/s per GPU in a
     * node), 400 Gb/s NDR InfiniBand per GPU (50 GB/s), PCIe Gen4 x16 at
     * ~25 GB/s with 100 Gb/s per GPU between nodes (12.5 GB/s), both with
     * NCCL's Simple latencies; ring-50 is ASTRA-sim's Ring_*npus.yml (50 GB/s,
     * 500 ns per step and per level, no per-call latency), kept as its link model */
    *out = (shs_net_t){0};
    snprintf(out->name, sizeof out->name, "%s", name);
    if (!strcmp(name, "hgx-h100") || !strcmp(name, "pcie")) {
        int pci = !strcmp(name, "pcie");
        out->gpus_per_node = 8;
        out->intra_bw = pci ? 25e9 : 400e9;
        out->inter_bw = pci ? 12.5e9 : 50e9;
        shs_net_set_nccl_simple_latency(out, pci);
        return SHS_OK;
    }
    if (!strcmp(name, "ring-50")) {
        out->gpus_per_node = 1 << 30;
        out->intra_bw = out->inter_bw = 50e9;
        out->intra_lat = out->inter_lat = out->tree_intra_lat = out->tree_inter_lat = 500e-9;
        return SHS_OK;
    }
    return shs_set_error(SHS_INVALID_ARG, "unknown network preset '%s' (hgx-h100, ring-50, pcie, or an ASTRA-sim .yml)", name);
}

shs_status_t shs_net_load(const char *path, shs_net_t *out) {
    shs_astra_net_t an;
    SHS_CHECK(shs_astra_net_load(path, &an));
    int last = an.dims - 1;
    *out = (shs_net_t){0};
    snprintf(out->name, sizeof out->name, "%s", path);
    out->astra = 1;
    out->anet = an;
    shs_astra_sys_default(&out->asys);
    out->gpus_per_node = an.dims == 1 ? 1 << 30 : an.npus[0]; /* one dimension: everything on one "node" */
    out->intra_bw = an.bw_gbps[0] * 1073741824.0; /* ASTRA-sim's GB: 2^30 bytes */
    out->intra_lat = an.lat_ns[0] * 1e-9;
    out->inter_bw = an.bw_gbps[last] * 1073741824.0;
    out->inter_lat = an.lat_ns[last] * 1e-9;
    out->tree_intra_lat = out->intra_lat; /* ASTRA-sim's link latency: per step and per level, */
    out->tree_inter_lat = out->inter_lat; /* base latencies 0 */
    return SHS_OK;
}

shs_status_t shs_net_set_system(shs_net_t *net, const char *path) {
    if (!net->astra)
        return shs_set_error(SHS_INVALID_ARG, "--system %s: network %s is a preset; an ASTRA-sim system JSON goes "
                             "with an ASTRA-sim network .yml", path, net->name);
    return shs_astra_sys_load(path, &net->asys);
}

