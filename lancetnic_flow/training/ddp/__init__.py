"""--ddp N: data-parallel training on Dask workers. The driver runs on the
trainer, the ranks on the workers, and comm holds what they exchange."""
