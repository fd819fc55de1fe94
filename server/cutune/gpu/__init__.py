"""cutune.gpu"""
