"""The Llama family: pure accounting at the top (shape, sizing, recipe, config, schedule, hardware; no torch) and
what runs on a node in data/, training/ and evaluation/. Imports only ladder.errors and ladder.layout from ladder/.
"""
