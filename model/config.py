"""Typed configs of one run: its data, optimizer, schedule and the full run spec written to ``spec.json``.

The study spec (``ladder.studies.spec``) reuses these sections, so a field means the same thing in a study
YAML and in a run's ``spec.json``.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Annotated, Any, Literal

from ladder.model.shape import ModelShape
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

_SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_COUNT = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGTP]?)\s*$", re.IGNORECASE)


def parse_count(value: Any) -> Any:
    """Read human counts: ``50K``, ``1.5M``, ``2.7B``, ``4T``, ``1e21``; numbers pass through.

    Anything else is returned unchanged so that pydantic reports it with the field's path."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        m = _COUNT.match(value)
        if m:
            number = float(m.group(1)) * _SUFFIX[m.group(2).upper()]
            return int(number) if number.is_integer() and abs(number) < 2**63 else number
    return value


def format_count(n: float) -> str:
    """``134515008`` -> ``134.5M``; the inverse of ``parse_count`` up to rounding."""
    n = float(n)
    for suffix, scale in (("P", 1e15), ("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g}{suffix}"
    return f"{n:.4g}"


Count = Annotated[int, BeforeValidator(parse_count), Field(gt=0)]
"""A positive integer count that may be written as ``50K``."""
Flops = Annotated[float, BeforeValidator(parse_count), Field(gt=0)]
"""A positive FLOP count that may be written as ``1e21`` or ``3.2T``."""


class Strict(BaseModel):
    """Unknown fields are errors: a typo in a spec must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class DataConfig(Strict):
    corpus: str = Field(
        default="embedded",
        description="'embedded' (built from text already installed on this machine), a local jsonl/parquet "
        "file or folder, a folder of .txt files, or 'hf:<dataset>[:<config>]' (needs the hub).",
    )
    text_key: str = Field(default="text", description="column or key that holds the text")
    tokenizer: str = Field(
        default="train",
        description="'train' (a byte-level BPE trained on the corpus with the model's vocab_size), "
        "a local tokenizer folder or tokenizer.json, or a hub id when online",
    )
    seq_len: int = Field(default=256, gt=1, le=1_048_576)
    validation_fraction: float = Field(default=0.02, gt=0, lt=0.5, description="share of documents held out")
    validation_tokens: Count = Field(default=131072, description="tokens of the fixed validation set used by eval")
    max_bytes: Count | None = Field(
        default=None, description="cap on the corpus size read (deterministic prefix of the sorted documents)"
    )


class OptimizerConfig(Strict):
    betas: tuple[Annotated[float, Field(ge=0, lt=1)], Annotated[float, Field(ge=0, lt=1)]] = (0.9, 0.95)
    eps: float = Field(default=1e-8, gt=0)
    weight_decay: float = Field(default=0.1, ge=0)
    no_decay: list[Literal["embeddings", "norms", "biases", "lm_head"]] = Field(
        default_factory=lambda: ["embeddings", "norms", "biases"],
        description="parameter groups that get no weight decay (an untied lm_head is a matrix and decays "
        "unless listed)",
    )


class ScheduleConfig(Strict):
    kind: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_fraction: float = Field(
        default=0.05, ge=0, lt=1,
        description="share of steps warming up linearly; with several ladder.budgets under wsd, the share of "
        "the SMALLEST budget's steps, so that every budget of a size shares one warmup",
    )  # fmt: skip
    warmup_tokens: Count | None = Field(
        default=None,
        description="warmup length in tokens instead of warmup_fraction (the same for every budget of a size)",
    )
    cooldown_fraction: float = Field(default=0.2, ge=0, le=1, description="wsd: share of steps cooling down")
    cooldown_shape: Literal["linear", "1-sqrt"] = "linear"
    final_lr_fraction: float = Field(default=0.1, ge=0, le=1, description="LR at the end, as a share of peak")

    @model_validator(mode="after")
    def _fractions_fit(self) -> "ScheduleConfig":
        if self.kind == "wsd" and self.warmup_fraction + self.cooldown_fraction > 1:
            raise ValueError(
                f"warmup_fraction + cooldown_fraction = {self.warmup_fraction + self.cooldown_fraction:g} "
                "exceeds 1: no room for the stable phase"
            )
        return self


class DivergenceConfig(Strict):
    spike_factor: float = Field(default=2.0, gt=1, description="loss above factor x its running minimum ...")
    patience: int = Field(default=20, ge=1, description="... for this many consecutive steps diverges")


class TrunkRef(Strict):
    """Where a cooldown branch starts: the snapshot its trunk writes after ``step`` updates."""

    run_id: str = Field(min_length=1)
    step: int = Field(gt=0, description="the branch's first cooldown update: it trains steps step+1..steps")


# Fields that say how a run relates to others or how a study was written, not what it trains: left out of
# the run id, so that a branch has the id of the independent run with the same science.
_NOT_HASHED: dict[str, Any] = {
    "run_id": True, "study": True, "axes": True, "variant": True, "trunk": True, "branch_steps": True,
    "schedule": {"warmup_tokens"},  # already resolved into warmup_steps
}  # fmt: skip


class RunSpec(Strict):
    """Everything one run needs, written by ``ladder plan`` to ``spec.json``; its hash is the run id."""

    run_id: str = ""
    study: str
    axes: dict[str, Any] = Field(default_factory=dict, description="the study axes that define this run")
    variant: str = Field(default="base", description="label of the ablation combination (axes other than size)")
    param_convention: Literal["total", "non_embedding"]
    params: int = Field(gt=0, description="parameter count in param_convention")
    shape: ModelShape
    data: DataConfig
    tokens: int = Field(gt=0, description="training tokens (steps x batch_tokens)")
    batch_tokens: int = Field(gt=0)
    micro_batch_size: int = Field(gt=0, description="sequences per forward pass; accumulation covers the rest")
    steps: int = Field(gt=0)
    lr: float = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    schedule: ScheduleConfig
    optimizer: OptimizerConfig
    grad_clip: float | None = Field(default=1.0, gt=0)
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    compile: bool = False
    seed: int = Field(default=0, description="drives both the initialisation and the data order")
    eval_interval: int = Field(gt=0, description="steps between evaluations")
    eval_tokens: int = Field(gt=0)
    log_interval: int = Field(gt=0)
    checkpoint_interval: int = Field(gt=0, description="steps between periodic checkpoints")
    checkpoint_minutes: float = Field(gt=0, description="also checkpoint when this much time has passed")
    divergence: DivergenceConfig = Field(default_factory=DivergenceConfig)
    flops_per_token: int = Field(gt=0)
    flops: float = Field(gt=0)
    trunk: TrunkRef | None = Field(
        default=None, description="a cooldown branch: starts from this trunk's snapshot (not in the run id)"
    )
    branch_steps: list[int] = Field(
        default_factory=list, description="a trunk: steps after which it writes a snapshot for its branches"
    )

    @property
    def own_steps(self) -> int:
        """The updates this run trains itself: a branch starts after its trunk's ``trunk.step``."""
        return self.steps - (self.trunk.step if self.trunk else 0)

    @property
    def own_flops(self) -> float:
        """FLOPs of the updates this run trains itself (``flops`` for a trunk or an independent run)."""
        return self.flops * self.own_steps / self.steps

    @property
    def sequences_per_batch(self) -> int:
        return self.batch_tokens // self.data.seq_len

    @property
    def grad_accum_steps(self) -> int:
        return max(1, self.sequences_per_batch // self.micro_batch_size)

    def content_hash(self) -> str:
        """Hash of what determines the training, not of labels: two specs that train the same model on the
        same data the same way get the same id."""
        payload = self.model_dump(mode="json", exclude=_NOT_HASHED)
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def with_id(self) -> "RunSpec":
        return self.model_copy(update={"run_id": self.content_hash()})
