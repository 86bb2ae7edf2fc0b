"""The harness's files: where they live, and how they are locked (docs/architecture.md)."""
