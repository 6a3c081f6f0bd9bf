"""The optional PyTorch extra: import torch's schedules, export to its CSV, run a schedule, profile a model."""
