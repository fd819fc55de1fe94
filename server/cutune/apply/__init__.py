"""cutune.apply: a tuned configuration, or a per-size dispatch of several, written into the kernel's source."""
