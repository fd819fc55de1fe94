"""cutune.agent"""
