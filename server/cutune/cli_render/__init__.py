"""Terminal rendering of core results for the command line (rich lives here, never in the core)."""
