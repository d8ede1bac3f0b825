"""The memory one training run needs on its device, from its shape and micro-batch: what the plan checks against
the device it names (``ladder.model.hardware.DEVICE_MEMORY``) before it writes anything.

Pure accounting (no torch). Bytes, per device (data parallelism splits the batch, not the model):

- state = ``P x (4 + 4 + 8)``: fp32 weights, their gradients and AdamW's two moments (``P`` = ``params_total``);
  plus ``2 P`` under bf16 autocast for the bf16 copies of the weights that autocast keeps during a step.
- activations = ``m T (L (4 d + 4 H h + 2 K h + 4 f) + 3 d) x b``: what autograd saves for the backward pass per
  token of a micro-batch of ``m`` sequences of ``T`` tokens (``d`` d_model, ``H`` heads and ``K`` KV heads of
  ``h`` dims, ``f`` ffn_dim, ``L`` layers): the two RMSNorms' inputs and outputs, q, k, v before and after RoPE,
  the attention output, SwiGLU's gate, up and product, and the last norm plus the loss's hidden-state gradient.
  ``b`` = 4 bytes in fp32, 3 under bf16 autocast (matmul outputs in bf16, norms and the residual stream in fp32).
  Counted on transformers' Llama with the trainer's chunked loss: within 5% of the bytes of the tensors autograd
  saves, at d_model 64 and 256, with GQA and with three times the ffn (tests/model/test_memory.py measures two).
- backward transient = two layers' activations (the gradients in flight while a layer's backward runs).
- loss buffers = the LM head's fp32 weight gradient (``V d x 4``) and two fp32 chunks of logits.
- x 1.1 for the allocator's fragmentation.

The logits of a whole micro-batch never exist (:mod:`ladder.model.training.loss`), which is why the vocabulary
enters only through the head's weight gradient and one chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

from ladder.model.shape import ModelShape

ALLOCATOR_SLACK = 1.1
CHUNK_LOGITS_BYTES = 2 * 64 << 20  # two chunks of at most 64 MiB of fp32 logits (CPU chunks are 1 MiB)


def activation_floats_per_token(shape: ModelShape) -> int:
    """Values autograd saves per token of a micro-batch (see the module docstring for the terms)."""
    d, h, f = shape.d_model, shape.head_dim, shape.ffn_dim
    per_layer = 4 * d + 4 * shape.n_heads * h + 2 * shape.n_kv_heads * h + 4 * f
    return shape.n_layers * per_layer + 3 * d


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes one run needs on one device."""

    state: int
    activations: int
    transient: int
    loss_buffers: int

    @property
    def total(self) -> int:
        return int(ALLOCATOR_SLACK * (self.state + self.activations + self.transient + self.loss_buffers))

    def to_dict(self) -> dict[str, int]:
        return {"state": self.state, "activations": self.activations, "transient": self.transient,
                "loss_buffers": self.loss_buffers, "total": self.total}  # fmt: skip


def run_memory(shape: ModelShape, micro_batch_size: int, seq_len: int, precision: str) -> MemoryEstimate:
    """The estimate for one micro-batch of ``micro_batch_size`` sequences of ``seq_len`` tokens; ``precision`` is
    ``fp32`` or ``bf16`` (autocast)."""
    p = shape.params_total
    bf16 = precision == "bf16"
    state = p * (4 + 4 + 8) + (2 * p if bf16 else 0)
    per_token = activation_floats_per_token(shape) * (3 if bf16 else 4)
    tokens = micro_batch_size * seq_len
    activations = tokens * per_token
    one_layer = tokens * (activation_floats_per_token(shape) - 3 * shape.d_model) // shape.n_layers
    transient = 2 * one_layer * (3 if bf16 else 4)
    loss_buffers = shape.vocab_size * shape.d_model * 4 + min(CHUNK_LOGITS_BYTES, 2 * tokens * shape.vocab_size * 4)
    return MemoryEstimate(state=state, activations=activations, transient=transient, loss_buffers=loss_buffers)
