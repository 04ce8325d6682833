/* cluster.c: the links of a cluster (pt_cluster, pipetrain.h) and what the
 * collectives of a layout cost on them. predict.c asks for the
 * tensor-parallel all-reduces, the pipeline's transfers and the
 * data-parallel reduce; io/cluster_file.c reads a cluster from JSON.
 *
 * Placement follows Megatron-LM's rank order: the devices of a tensor group
 * are consecutive, then the data replicas, then the pipeline stages. A group
 * whose members are `stride` devices apart and n of them spans stride x n
 * consecutive devices; it talks over the node's link while that fits in one
 * node and over the network otherwise, at each device's share of it.
 *
 * A ring all-reduce of B bytes over n devices moves 2 (n-1)/n B through
 * every device's link in 2 (n-1) steps, each paying the latency. */
#include "plan/cost.h"

const pt_interconnect *pt_cluster_link(const pt_cluster *c, long span)
{
    return span <= c->devices_per_node ? &c->intra_node : &c->inter_node;
}

double pt_cluster_allreduce_seconds(const pt_cluster *c, double bytes, int n, int stride)
{
    if (n <= 1 || bytes <= 0)
        return 0;
    const pt_interconnect *l = pt_cluster_link(c, (long)n * stride);
    return 2.0 * (n - 1) / n * bytes / l->bandwidth + 2.0 * (n - 1) * l->latency;
}
