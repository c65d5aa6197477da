"""receval.curves."""
