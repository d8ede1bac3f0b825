"""Training one run on a node: the Llama builder, AdamW, checkpoints, the loop with its signals, devices and bar.
Imports ladder.model's accounting and data packages and only the leaf modules ladder.errors and ladder.layout.
"""
