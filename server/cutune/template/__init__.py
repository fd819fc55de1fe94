"""cutune.template"""
