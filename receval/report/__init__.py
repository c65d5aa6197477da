"""receval.report."""
