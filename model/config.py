"""Typed configs of one run: its data, optimizer, schedule and the full run spec written to ``spec.json``.

The study spec (``ladder.studies.spec``) reuses these sections, so a field means the same thing in a study
YAML and in a run's ``spec.json``.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ladder.errors import SpecError
from ladder.model.shape import ModelShape

_SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
# a sign is read too, so that "-25K" is reported as a negative count, not as text that does not parse
_COUNT = re.compile(r"^\s*([+-]?[0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGTP]?)\s*$", re.IGNORECASE)


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


def read_count(value: Any) -> int | float | None:
    """``value`` as a number when it is one or reads as a count (:func:`parse_count`); None for anything else (a
    bool is no count)."""
    n = parse_count(value)
    return None if isinstance(n, bool) or not isinstance(n, (int, float)) else n


def positive_count(
    value: Any,
    name: str,
    what: str = "a positive count such as 64M",
    *,
    at_least_one: bool = False,
    below: float | None = None,
) -> int | float:
    """``value`` (a number, or a count such as ``64M`` or ``1.5e9``: :func:`parse_count`) when it is above 0 (at
    least 1 and finite with ``at_least_one``) and below ``below``, if given; else the one-line SpecError that
    names the field or option: ``{name} {value!r}: must be {what}``. The one check of a count an option takes."""
    n = read_count(value)
    fine = n is not None and (n >= 1 and math.isfinite(n) if at_least_one else n > 0)
    if not fine or (below is not None and not n < below):
        raise SpecError(f"{name} {value!r}: must be {what}")
    return n


def format_count(n: float) -> str:
    """``134515008`` -> ``134.5M``; the inverse of ``parse_count`` up to rounding."""
    n = float(n)
    for suffix, scale in (("P", 1e15), ("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.4g}{suffix}"
    return f"{n:.4g}"


def format_flops(x: float) -> str:
    """Compute as the CLI and the report write it: ``63114240000000`` -> ``6.31e13`` (3 significant digits), never
    Python's ``6.31e+13`` (nor ``6.25e-08`` for a tiny ratio); reports/render/fmt.fmt_flops and the fits' sentences both give it."""
    x = float(x)
    if x == 0 or not math.isfinite(x):
        return "0" if x == 0 else str(x)
    if 1e-3 <= abs(x) < 1000:  # "--budget 1" read back as "1.00e0 FLOPs"
        return f"{x:.3g}"
    mantissa, exponent = f"{x:.2e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def format_multiple(x: float, sign: str = "x", digits: int = 3) -> str:
    """A distance or ratio as every message writes it: ``3.2`` -> ``3.2x``, ``4058`` -> ``4,058x``, ``3.2e6`` ->
    ``3.22e6x``, ``6.25e-8x``, never Python's ``4.06e+03x`` or ``6.25e-08x``. ``sign`` is the report's ``×``; ``digits`` (below 1,000) is for two
    multiples that only more digits tell apart."""
    x = float(x)
    if not math.isfinite(x):
        return f"{x}{sign}"
    if 1e-3 <= abs(x) < 1000 or x == 0:
        return f"{x:.{digits}g}{sign}"
    if 1000 <= abs(x) < 1e6:
        return f"{x:,.0f}{sign}"
    return f"{format_flops(x)}{sign}"


def share_of_hero(pct: float) -> tuple[str, str]:
    """The ladder's cost next to the hero's compute, as plan, fit and the report all say it (beside
    :func:`format_count`: plan and reports both read this module): a percent up to 100%
    (``("26.3%", "of the hero's compute")``, a small one in two digits, never "0.0%"), a multiple above it
    (``("38.6x", "the hero's compute")``, never "3861.5%"). ``pct`` is finite."""
    if pct > 100:  # 1.11e5x, never Python's 1.11e+05x
        return format_multiple(pct / 100), "the hero's compute"
    if pct >= 1:
        return f"{pct:.1f}%", "of the hero's compute"
    small = format_multiple(pct, sign="", digits=2) if 0 < pct < 1e-3 else f"{pct:.2g}"  # 2e-6, never 2.0e-06
    return f"{small}%", "of the hero's compute"


Count = Annotated[int, BeforeValidator(parse_count), Field(gt=0)]
"""A positive integer count that may be written as ``50K``."""
Flops = Annotated[float, BeforeValidator(parse_count), Field(gt=0)]
"""A positive FLOP count that may be written as ``1e21`` or ``3.2T``."""


def _texts(annotation: Any) -> set[str] | None:
    """The texts a field takes of its own: a Literal's words (``"auto"``), the empty set when none; None when it
    takes any text (a ``str`` anywhere in it)."""
    if annotation is str:
        return None
    if getattr(annotation, "__origin__", None) is Literal:
        return {a for a in annotation.__args__ if isinstance(a, str)}
    found: set[str] = set()
    for arg in getattr(annotation, "__args__", ()) or ():
        texts = _texts(arg)
        if texts is None:
            return None
        found |= texts
    return found


def _kinds(annotation: Any) -> set:
    """The plain types a field's annotation names anywhere in it (through Annotated, unions and lists)."""
    found = {annotation} if annotation in (bool, int, float, Any) else set()
    for arg in getattr(annotation, "__args__", ()) or ():
        found |= _kinds(arg)
    return found


class Strict(BaseModel):
    """Unknown fields are errors: a typo in a spec must never be silently ignored."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _bools_and_numbers_apart(cls, value: Any, info: ValidationInfo) -> Any:
        # pydantic's lax mode reads true as 1 and 1 as true: `tokens_per_param: true` trained at 1 token/param
        field = cls.model_fields.get(info.field_name or "")
        kinds = _kinds(field.annotation) if field is not None else {Any}
        if Any in kinds:
            return value
        items = value if isinstance(value, list) else [value]
        if kinds & {int, float} and bool not in kinds and any(isinstance(v, bool) for v in items):
            raise ValueError("true/false is no value here: give a number")
        if kinds == {bool} and any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items):
            raise ValueError("a number is no value here: give true or false")
        texts = _texts(field.annotation) if kinds == {bool} else None
        if texts is not None and any(isinstance(v, str) and v not in texts for v in items):
            # lax mode read the text "yes", "off" or "0" as a boolean: `sanity_check: "no"` passed as false,
            # `compile: "yes"` as true, and "nein" was refused; YAML's own yes/no (unquoted) arrive as booleans
            words = "".join(f" or {t}" for t in sorted(texts))
            raise ValueError(f"a text is no value here: give true or false (unquoted){words}")
        return value


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
        default_factory=lambda: ["embeddings", "lm_head", "norms", "biases"],
        description="parameter groups that get no weight decay. 'embeddings' is the input embedding, 'lm_head' an "
        "UNTIED output head; list both or neither, so that tied and untied runs get the same treatment. A tied "
        "matrix is both and follows 'embeddings' (the plan warns when the two differ)",
    )

    def embedding_and_head_differ(self) -> bool:
        """True when the input embedding and an untied head get different decay: a tied-vs-untied comparison then
        also measures a decay difference (a tied matrix follows the embedding's setting)."""
        return ("embeddings" in self.no_decay) != ("lm_head" in self.no_decay)


class ScheduleConfig(Strict):
    kind: Literal["cosine", "wsd", "constant"] = "cosine"
    warmup_fraction: float = Field(
        default=0.05, ge=0, lt=1,
        description="share of steps warming up linearly; with several ladder.budgets under wsd, the share of "
        "the steps of the size's 1x budget (tokens_per_param x N, what a hero planned alone at the rule gets), so "
        "that every budget of a size shares one warmup",
    )  # fmt: skip
    warmup_tokens: Count | None = Field(
        default=None,
        description="warmup length in tokens instead of warmup_fraction (the same for every budget of a size)",
    )
    cooldown_fraction: float = Field(default=0.2, ge=0, le=1, description="wsd: share of steps cooling down")
    cooldown_shape: Literal["linear", "1-sqrt"] = "linear"
    final_lr_fraction: float = Field(default=0.1, ge=0, le=1, description="LR at the end, as a share of peak")

    @model_validator(mode="after")
    def _fractions_fit(self) -> ScheduleConfig:
        if self.kind == "wsd" and self.warmup_fraction + self.cooldown_fraction > 1:
            raise ValueError(
                f"warmup_fraction + cooldown_fraction = {self.warmup_fraction + self.cooldown_fraction:g} "
                "exceeds 1: no room for the stable phase"
            )
        return self


class DivergenceConfig(Strict):
    spike_factor: float = Field(
        default=2.0,
        gt=1,
        description="loss above factor x its lowest typical loss (the median of `patience` steps) ...",
    )
    patience: int = Field(default=20, ge=1, description="... for this many consecutive steps diverges")


class TrackingConfig(Strict):
    """An experiment tracker that every run also logs to (``ladder.model.training.tracking``): its config (the
    run spec), its hardware and every record of its ``metrics.jsonl``, resumed into the same tracker run after a
    restart."""

    kind: Literal["none", "tensorboard", "wandb"] = Field(
        default="none",
        description="'tensorboard' (pip install 'ladder[tensorboard]') or 'wandb' (pip install "
        "'ladder[wandb]'; WANDB_MODE=offline keeps its files in each run directory, `wandb sync` uploads them)",
    )
    project: str | None = Field(default=None, description="W&B project (default: ladder)")
    entity: str | None = Field(default=None, description="W&B team or user (default: your W&B default)")
    group: str | None = Field(default=None, description="the group of the study's runs (default: the study's name)")
    tags: list[str] = Field(default_factory=list, description="W&B tags of every run")
    dir: str | None = Field(
        default=None,
        description="where the tracker writes: W&B's folder (default: each run's directory) or the "
        "TensorBoard log root (default: <study>/tensorboard); a relative path is relative to the study directory",
    )

    # W&B's own rules for these names: broken, they were planned, and every run then warned "could not start the
    # wandb tracker (UsageError: Invalid project name ...)" and trained untracked
    @field_validator("project")
    @classmethod
    def _wandb_project(cls, project: str | None) -> str | None:
        if project is not None:
            bad = "".join(c for c in "/\\#?%:" if c in project)
            if bad:
                raise ValueError(f"a W&B project name cannot hold {' '.join(bad)}")
            if len(project) > 128:
                raise ValueError(f"a W&B project name has at most 128 characters, this one {len(project)}")
        return project

    @field_validator("tags")
    @classmethod
    def _wandb_tags(cls, tags: list[str]) -> list[str]:
        for tag in tags:
            if not 1 <= len(tag) <= 64:
                raise ValueError(f"a W&B tag has 1 to 64 characters, one has {len(tag)}")
        return tags

    @model_validator(mode="after")
    def _wandb_fields_need_wandb(self) -> TrackingConfig:
        # `tracking: {kind: none, project: x}` was accepted and logged nowhere: the user meant a tracker
        given = [f for f in ("project", "entity", "group", "tags") if getattr(self, f)]
        if given and self.kind != "wandb":
            raise ValueError(
                f"{', '.join(given)} {'is a W&B field' if len(given) == 1 else 'are W&B fields'}, and kind is "
                f"'{self.kind}': set kind: wandb, or leave {'it' if len(given) == 1 else 'them'} out"
            )
        return self


class TrunkRef(Strict):
    """Where a cooldown branch starts: the snapshot its trunk writes after ``step`` updates."""

    run_id: str = Field(min_length=1)
    step: int = Field(gt=0, description="the branch's first cooldown update: it trains steps step+1..steps")


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
    micro_batch_size: int = Field(
        gt=0,
        description="sequences per forward pass; accumulation covers the rest (the "
        "last chunk is smaller when it does not divide the batch)",
    )
    steps: int = Field(gt=0)
    lr: float = Field(gt=0)
    warmup_steps: int = Field(ge=0)
    schedule: ScheduleConfig
    optimizer: OptimizerConfig
    grad_clip: float | None = Field(default=1.0, gt=0)
    precision: Literal["auto", "fp32", "bf16"] = Field(
        default="auto",
        description="as the plan resolved it for the target hardware; 'auto' (a spec written by "
        "hand) lets the trainer choose: bf16 on a CUDA device that supports it, else fp32",
    )
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
    tracking: TrackingConfig = Field(default_factory=TrackingConfig, description="the experiment tracker it logs to")
    role: Literal["rung", "hero"] = Field(
        default="rung",
        description="'rung': a run of the ladder, fitted; 'hero': the run the ladder forecasts "
        "(`ladder hero`), scored against the frozen forecast and never fitted (not in the run id)",
    )

    @property
    def own_steps(self) -> int:
        """The updates this run trains itself: a branch starts after its trunk's ``trunk.step``."""
        return self.steps - (self.trunk.step if self.trunk else 0)

    @property
    def own_tokens(self) -> int:
        """Tokens of the updates this run trains itself (``tokens`` for a trunk or an independent run)."""
        return self.tokens * self.own_steps // self.steps

    @property
    def own_flops(self) -> float:
        """FLOPs of the updates this run trains itself (``flops`` for a trunk or an independent run)."""
        return self.flops * self.own_steps / self.steps

    @property
    def sequences_per_batch(self) -> int:
        return self.batch_tokens // self.data.seq_len

    @property
    def grad_accum_steps(self) -> int:
        """Forward passes per step: the last one is smaller when micro_batch_size does not divide the batch."""
        return max(1, -(-self.sequences_per_batch // self.micro_batch_size))

    def content_hash(self) -> str:
        """Hash of the run's science (:data:`SCIENCE_FIELDS`: what changes its numbers), and of nothing else: two
        specs that train the same model on the same data the same way get the same id, whatever their labels,
        micro-batch, intervals or compile setting (:data:`NOT_SCIENCE_FIELDS`), and a branch has the id of the
        independent run with the same science. A checkpoint carries this hash, so a run resumes from one written
        with another micro-batch but never from one of other science."""
        payload = self.model_dump(mode="json", include=set(SCIENCE_FIELDS), exclude=NOT_SCIENCE_SUBFIELDS)
        blob = json.dumps(payload, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def with_id(self) -> RunSpec:
        return self.model_copy(update={"run_id": self.content_hash()})


SCIENCE_FIELDS = (
    "shape",
    "data",
    "tokens",
    "batch_tokens",
    "steps",
    "lr",
    "warmup_steps",
    "schedule",
    "optimizer",
    "grad_clip",
    "precision",
    "seed",
    "eval_tokens",
    "divergence",
)
"""The ``RunSpec`` fields that change a run's numbers: hashed into its id. ``precision`` is hashed as the plan
resolved it for the target hardware (``auto`` becomes fp32 or bf16 there)."""

NOT_SCIENCE_FIELDS = {
    "run_id": "the hash itself",
    "study": "a label",
    "axes": "labels of the study's axes",
    "variant": "a label",
    "param_convention": "how the size is counted, not what is trained",
    "params": "the size in param_convention: a count of the shape (hashed)",
    "micro_batch_size": "how a step is split into forward passes; the gradient is the same mean over the batch",
    "eval_interval": "when to evaluate: evaluation never touches the training state",
    "log_interval": "when to log",
    "checkpoint_interval": "when to checkpoint",
    "checkpoint_minutes": "when to checkpoint",
    "compile": "how the same computation is executed",
    "flops_per_token": "accounting of the shape (hashed); a fix to the count must not rename runs",
    "flops": "accounting: flops_per_token x tokens",
    "trunk": "which run a branch starts from (its science is its own schedule and budget)",
    "branch_steps": "steps after which a trunk keeps a snapshot for its branches: a copy, its updates are the same",
    "tracking": "where the metrics are mirrored (an experiment tracker): it reads the training, never changes it",
    "role": "what the study does with the run's numbers (fit them, or score a forecast with them), not how they "
    "are made: a hero with a rung's science is that rung's run",
}
"""Every other ``RunSpec`` field, and why it does not change the run's numbers (a test holds that every field is
in exactly one of the two)."""

NOT_SCIENCE_SUBFIELDS: dict[str, set[str]] = {
    "schedule": {"warmup_tokens"},  # already resolved into warmup_steps (hashed): how the study said it
}
"""Parts of a science field left out of the hash, and why."""
