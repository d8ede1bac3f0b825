"""Data for a run, on the node: corpora (read with datatrove), the embedded corpus, tokenizers, the tokenized cache.
Imports only ladder.model's accounting (config) and the leaf modules ladder.errors and ladder.layout; no torch.
"""
