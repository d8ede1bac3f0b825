"""Llama variants: shapes and their exact accounting (no torch), sizing, recipe rules, data and training.

Nothing here imports from the rest of ladder (only the leaf modules ``ladder.errors`` and ``ladder.layout``);
``accounting``, ``shape``, ``sizing`` and ``recipe`` do not import torch.
"""
