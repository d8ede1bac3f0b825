"""A Llama shape and its exact accounting, as plain arithmetic (no torch).

Parameter conventions (state one every time a count is quoted):

- ``total``: every trainable parameter, counted once (a tied embedding/LM head matrix counts once). This is
  Chinchilla's N and what ``sum(p.numel() for p in model.parameters())`` returns.
- ``embedding``: the input embedding, plus the LM head when it is not tied.
- ``non_embedding``: total minus embedding (Kaplan's N): attention and MLP matrices and the RMSNorm gains.

The architecture is transformers' ``LlamaForCausalLM`` with no biases: per layer q/k/v/o projections,
a SwiGLU MLP (gate, up, down) and two RMSNorms; a final RMSNorm; an LM head, tied or not.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

# What the ladder's cost counts, wherever it is shown (the plan, ``ladder fit``'s summary, the report's headline and
# its section on the ladder): one figure, the exact counted FLOPs of the ladder's own training.
LADDER_COST_COUNTS = (
    "each trunk once, each cooldown branch only its steps after its branch point, every seed "
    "replicate, failed and cancelled runs as far as they trained; not the hero run"
)


class ModelShape(BaseModel):
    """The numbers that fix a Llama model's size. Validated: heads divide evenly, everything positive."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    d_model: int = Field(gt=0, description="hidden size")
    n_layers: int = Field(gt=0)
    n_heads: int = Field(gt=0, description="query heads")
    n_kv_heads: int = Field(gt=0, description="key/value heads (GQA when fewer than n_heads)")
    head_dim: int = Field(gt=0)
    ffn_dim: int = Field(gt=0, description="SwiGLU intermediate size")
    vocab_size: int = Field(gt=0)
    tied: bool = Field(description="LM head shares the input embedding matrix")
    max_seq_len: int = Field(default=2048, gt=0)
    rope_theta: float = Field(default=10000.0, gt=0)
    norm_eps: float = Field(default=1e-5, gt=0)
    init_std: float = Field(default=0.02, gt=0)

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelShape:
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not divisible by n_kv_heads={self.n_kv_heads} "
                "(grouped-query attention needs a whole number of query heads per KV head)"
            )
        if self.d_model % self.n_heads:
            raise ValueError(
                f"d_model={self.d_model} is not divisible by n_heads={self.n_heads} (transformers' Llama needs "
                "a whole number of hidden units per head)"
            )
        if self.head_dim % 2:
            raise ValueError(f"head_dim={self.head_dim} is odd: rotary embeddings need an even head_dim")
        return self

    # ---- parameter counts -------------------------------------------------------------------------
    @property
    def attn_params_per_layer(self) -> int:
        q_and_o = 2 * self.d_model * self.n_heads * self.head_dim
        k_and_v = 2 * self.d_model * self.n_kv_heads * self.head_dim
        return q_and_o + k_and_v

    @property
    def mlp_params_per_layer(self) -> int:
        return 3 * self.d_model * self.ffn_dim

    @property
    def norm_params_per_layer(self) -> int:
        return 2 * self.d_model

    @property
    def params_per_layer(self) -> int:
        return self.attn_params_per_layer + self.mlp_params_per_layer + self.norm_params_per_layer

    @property
    def params_embedding(self) -> int:
        matrices = 1 if self.tied else 2
        return matrices * self.vocab_size * self.d_model

    @property
    def params_non_embedding(self) -> int:
        return self.n_layers * self.params_per_layer + self.d_model  # + final norm

    @property
    def params_total(self) -> int:
        return self.params_non_embedding + self.params_embedding

    def params(self, convention: str) -> int:
        """Parameter count in a named convention: ``total`` or ``non_embedding``."""
        if convention == "total":
            return self.params_total
        if convention == "non_embedding":
            return self.params_non_embedding
        raise ValueError(f"unknown parameter convention {convention!r}: use 'total' or 'non_embedding'")

    # ---- FLOPs ------------------------------------------------------------------------------------
    @property
    def matmul_params(self) -> int:
        """Parameters that take part in a matrix multiply for every token: all layer matrices and the LM
        head (the embedding lookup is a gather, RMSNorm gains are elementwise)."""
        return self.n_layers * (self.attn_params_per_layer + self.mlp_params_per_layer) + (
            self.vocab_size * self.d_model
        )

    def flops_per_token(self, seq_len: int | None = None) -> int:
        """Training FLOPs per token (forward + backward), counted as:

            6 * matmul_params  +  6 * n_layers * seq_len * n_heads * head_dim

        The first term is 2 FLOPs per multiply-accumulate forward and 4 backward over every matrix a token
        passes through, LM head included and the embedding lookup excluded. The second is the attention
        scores (QK^T) and the weighted sum (AV) under a causal mask: forward 2 * 2 * (seq_len / 2) * d_attn per
        layer, times 3 for the backward pass. Elementwise work (norms, SwiGLU, softmax, RoPE) is ignored,
        as in Kaplan et al. (2020) and Hoffmann et al. (2022). ``seq_len`` defaults to ``max_seq_len``.
        """
        t = self.max_seq_len if seq_len is None else seq_len
        return 6 * self.matmul_params + 6 * self.n_layers * t * self.n_heads * self.head_dim

    @property
    def flops_per_token_6n(self) -> int:
        """The plain Chinchilla rule, 6 x params_total (no attention term, embedding counted as if a matmul)."""
        return 6 * self.params_total

    # ---- presentation -----------------------------------------------------------------------------
    @property
    def aspect_ratio(self) -> float:
        return self.d_model / self.n_layers

    def describe(self) -> str:
        return f"{self.d_model}x{self.n_layers} h{self.n_heads}/kv{self.n_kv_heads}"

    def public_dict(self) -> dict:
        """The shape keys every JSON output uses."""
        return {
            "d_model": self.d_model,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "n_kv_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "ffn_dim": self.ffn_dim,
            "vocab_size": self.vocab_size,
            "tied": self.tied,
        }

    def accounting(self, seq_len: int | None = None) -> dict:
        """Everything ``ladder model info --json`` prints."""
        return {
            "params_total": self.params_total,
            "params_embedding": self.params_embedding,
            "params_non_embedding": self.params_non_embedding,
            "flops_per_token": self.flops_per_token(seq_len),
            "flops_per_token_6n": self.flops_per_token_6n,
            "seq_len": self.max_seq_len if seq_len is None else seq_len,
            "shape": self.public_dict(),
        }
