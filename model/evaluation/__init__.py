"""Checks of a trained run and of the training code: lm-eval downstream tasks (shipped in tasks/), the overfit test.
Imports ladder.model's accounting, data and training, and from ladder/ only the leaf modules errors and layout.
"""
