"""Reading what Miles prints: line reader, step merger, argument dump, failures."""
