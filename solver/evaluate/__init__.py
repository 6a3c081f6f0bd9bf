"""Evaluation: time an order (simulator, re-timing), check it (validator), measure it (metrics), bound it (bounds)."""
