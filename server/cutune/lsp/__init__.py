"""cutune.lsp"""
