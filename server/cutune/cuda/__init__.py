"""cutune.cuda"""
