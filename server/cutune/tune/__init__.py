"""cutune.tune"""
