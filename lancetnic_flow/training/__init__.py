"""The training run: state, the step, the single-process loop, the orchestrator,
optimisers, checkpoints and the --ddp ranks."""
