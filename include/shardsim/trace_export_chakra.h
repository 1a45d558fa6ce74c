/* trace_export_chakra.h - write a trace as Chakra ET for other tools.
 *
 * What it is: Chakra ET export (one protobuf file per rank, the format
 * ASTRA-sim's Chakra workload reader takes): a GlobalMetadata message
 * (version "0.0.4"), then per call one Node, each varint32-length-prefixed;
 * collectives as COMM_COLL_NODE with attrs comm_type (CollectiveCommType),
 * comm_size (bytes of one rank's input, as ASTRA-sim reads it: one rank's
 * part for all_gather, the whole buffer for reduce_scatter, a rank's whole
 * send buffer for all_to_all; shs_trace_input_scope()), is_cpu_op = false;
 * send/recv as COMM_SEND_NODE / COMM_RECV_NODE with comm_dst / comm_src and
 * comm_tag. Each node's data_deps is the rank's previous node, so the calls
 * run in trace order. Waits are not written.
 * What it is not: an exporter of compute nodes; traces with more than one
 * communicator are refused (Chakra's process groups are not written).
 */
#ifndef SHARDSIM_TRACE_EXPORT_CHAKRA_H
#define SHARDSIM_TRACE_EXPORT_CHAKRA_H

#include "shardsim/trace.h"

/* Write <prefix>.<rank>.et for every rank. A prefix that is a directory,
 * device or FIFO, or ends in '/', is refused (shs_out_prefix_check) before
 * anything is written. Errors: SHS_IO, SHS_UNSUPPORTED
 * (built without protobuf-c; several communicators), SHS_HOST_OOM. */
shs_status_t shs_trace_export_chakra(const shs_trace_t *t, const char *prefix);
/* The file shs_trace_export_chakra writes for rank r: "<prefix>.<r>.et"
 * into buf (n bytes, truncated to fit). Built with or without protobuf-c. */
void shs_trace_chakra_path(char *buf, size_t n, const char *prefix, int rank);

#endif
