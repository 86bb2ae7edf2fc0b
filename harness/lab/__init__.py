"""Files shared by the harness and the lab image's entry (stdlib only)."""
