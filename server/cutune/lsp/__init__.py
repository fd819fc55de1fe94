"""cutune.lsp: the language server, a thin adapter from the core to LSP (`cutune serve`)."""
