/* nccl_tables.c - NCCL 2.20.3's tuning constants (nccl_tables.h). */
#include "net/nccl_tables.h"

/* Tree { LL, LL128, Simple }, Ring { LL, LL128, Simple } */
const double shs__nccl_base_lat[SHS__NCCL_NUM_ALGOS][SHS__NCCL_NUM_PROTOS] = {{6.8e-6, 14.0e-6, 0}, {6.6e-6, 14.0e-6, 8.4e-6}};

const double shs__nccl_hw_lat[3][SHS__NCCL_NUM_ALGOS][SHS__NCCL_NUM_PROTOS] = {
    /* NVLink */ {{.6e-6, 1.25e-6, 28e-6}, {.6e-6, 1.9e-6, 3.4e-6}},
    /* PCI */ {{1.0e-6, 1.9e-6, 28e-6}, {1.0e-6, 2.5e-6, 5.7e-6}},
    /* network */ {{5.0e-6, 8.5e-6, 28e-6}, {2.7e-6, 4.0e-6, 14.0e-6}},
};

/* rows: one node by GPU (Volta, Ampere, Hopper); several nodes by CPU (Intel row 0, AMD row 1) */
const double shs__nccl_ll_max_bw[3][3] = {{39.0, 39.0, 20.4}, {87.7, 22.5, 19.0}, {87.7, 22.5, 19.0}};
const double shs__nccl_ring_ll128_max_bw[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 36.7}};
const double shs__nccl_tree_ll128_max_bw[3][3] = {{20.0, 20.0, 20.0}, {20.0, 20.0, 20.0}, {36.7, 36.7, 29.0}};
const double shs__nccl_tree_max_bw[3][3] = {{26.5, 18.5, 10.0}, {24.0, 23.6, 17.8}, {38.7, 41.4, 36.0}};

const double shs__nccl_tree_correction[SHS__NCCL_NUM_PROTOS][23] = {
    {1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0},
    {1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0},
    {.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9},
};
