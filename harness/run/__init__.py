"""A run's life: plan, decide, lock, execute, settle; the simulator swap and the demo (docs/architecture.md)."""
