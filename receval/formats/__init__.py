"""receval.formats."""
