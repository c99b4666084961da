"""Real workloads: a kernel suite and a Montage mosaic pipeline."""
