"""receval.estimators."""
