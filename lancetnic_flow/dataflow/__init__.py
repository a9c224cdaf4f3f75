"""The dataflow on the cluster: the memory plan and the cluster it shapes, worker
set-up, the memory monitor, shards and their manifest, the ordered task window
and the stream of batches into the trainer."""
