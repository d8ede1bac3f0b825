"""The study spec: one YAML file that says which sizes, which ablations, which recipe, which hero.

Loaded with ``yaml.safe_load`` into ``StudySpec``; every section forbids unknown fields, so a typo fails
loudly. ``load_study`` turns any problem (missing file, bad YAML, bad field) into a ``SpecError`` whose
message names the field path, the bad value and what is allowed, before anything is written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    Field,
    PositiveFloat,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)

from ladder.errors import SpecError
from ladder.model.config import (
    Count,
    DataConfig,
    DivergenceConfig,
    Flops,
    OptimizerConfig,
    ScheduleConfig,
    Strict,
    TrackingConfig,
)
from ladder.model.sizing import FamilyRules
from ladder.studies.extra_runs import ExtraRunSpec, check_extra_runs
from ladder.studies.messages import pydantic_message
from ladder.studies.yaml_load import StudyYamlError, load_yaml

Auto = Literal["auto"]
MAX_LAYERS = 1024  # deeper than any model trained (Llama 3 405B has 126 layers); a bound that keeps sizing finite
MAX_ASPECT_RATIO = 1e4  # d_model / n_layers (real models: about 10 to 300); `ladder model info` has it too
AspectRatio = Annotated[float, Field(gt=0, le=MAX_ASPECT_RATIO)]
Seed = Annotated[int, Field(ge=0, lt=2**32)]  # a seed numpy and torch both take
Multiplier = Annotated[float, Field(gt=0, le=1e4)]  # a factor on a rule's learning rate or batch
LearningRate = Annotated[float, Field(gt=0, le=100)]  # a peak learning rate (AdamW's are below 0.1)


def _unique(values: list | None, what: str) -> None:
    if values is not None and len(set(values)) != len(values):
        raise ValueError(f"{what} has repeated values {values}: each value must appear once")


class FamilySpec(Strict):
    """Defaults shared by every model of the study (YAML key ``model``)."""

    vocab_size: int = Field(default=1024, ge=2, description="must hold the tokenizer's vocabulary")
    head_dim: PositiveInt = 64
    kv_ratio: PositiveInt = Field(default=1, description="query heads per KV head (GQA); 1 is plain MHA")
    ffn_ratio: PositiveFloat = Field(
        default=8 / 3, le=64, description="SwiGLU ffn_dim / d_model before rounding (Llama's is 8/3 to 3.5)"
    )
    ffn_multiple: PositiveInt = Field(default=16, description="ffn_dim is a multiple of this")
    ffn_band: float = Field(
        default=1.5,
        ge=1.0,
        le=8.0,  # a wider band lets sizing pick ffn_dim almost freely (and 1e308 overflowed the rounding)
        description="sizing may move ffn_dim this factor either way "
        "from ffn_ratio x d_model to land on a target size; near 1 keeps shapes regular",
    )
    norm_eps: PositiveFloat = 1e-5
    rope_theta: PositiveFloat = 10000.0
    init_std: PositiveFloat = 0.02
    aspect_ratio: AspectRatio = Field(default=32.0, description="d_model / n_layers unless an ablation sets it")
    tie_embeddings: bool = Field(default=True, description="unless an ablation sets it")
    max_layers: PositiveInt = Field(default=128, le=MAX_LAYERS, description="the deepest model the family builds")
    depth_rule: Literal["count", "aspect"] = Field(
        default="count",
        description="how a size picks its depth: 'count' = any depth, the parameter count "
        "nearest first (depth may bounce between sizes); 'aspect' = the depth at which aspect_ratio gives the size "
        "(depth never falls as size grows; width and ffn_dim land the count)",
    )

    @model_validator(mode="after")
    def _even_heads(self) -> FamilySpec:
        if self.head_dim % 2:
            raise ValueError(f"head_dim = {self.head_dim} is odd: rotary embeddings need an even head_dim")
        return self

    def rules(self, seq_len: int) -> FamilyRules:
        """The sizing rules of this family at a context length (what ``shape_for_params`` needs)."""
        return FamilyRules(
            vocab_size=self.vocab_size,
            head_dim=self.head_dim,
            kv_ratio=self.kv_ratio,
            ffn_ratio=self.ffn_ratio,
            ffn_multiple=self.ffn_multiple,
            ffn_band=self.ffn_band,
            max_seq_len=seq_len,
            rope_theta=self.rope_theta,
            norm_eps=self.norm_eps,
            init_std=self.init_std,
            max_layers=self.max_layers,
            depth_rule=self.depth_rule,
        )


MIN_TOKENS_PER_PARAM = 0.01
MAX_TOKENS_PER_PARAM = 1e5


def plain_number(x: float) -> str:
    """A number as a user types it and the tool prints it elsewhere: 0.0002, 20, 1e6, 2e7 (never Python's 1e+06)."""
    return f"{x:g}".replace("e+0", "e").replace("e+", "e").replace("e-0", "e-")


def _sane_tokens_per_param(tpp: float, budgets: list[float]) -> None:
    """Every run's tokens per parameter (tokens_per_param x each budget) between 0.01 (a run that sees 1% of its
    parameter count in tokens has learnt nothing to fit) and 100,000 (5,000x Chinchilla's 20; the most
    over-trained models stay below 10,000): beyond those the counts overflow or vanish."""
    if not MIN_TOKENS_PER_PARAM <= tpp <= MAX_TOKENS_PER_PARAM:
        raise ValueError(
            f"tokens_per_param = {plain_number(tpp)}: must be between {MIN_TOKENS_PER_PARAM:g} and "
            f"{MAX_TOKENS_PER_PARAM:,g} tokens per parameter (Chinchilla's rule is 20)"
        )
    for i, b in enumerate(budgets):
        if not MIN_TOKENS_PER_PARAM <= tpp * b <= MAX_TOKENS_PER_PARAM:
            raise ValueError(
                f"budgets[{i}] = {plain_number(b)}: x tokens_per_param {plain_number(tpp)} is "
                f"{plain_number(float(f'{tpp * b:.3g}'))} tokens per parameter; every budget must give between "
                f"{MIN_TOKENS_PER_PARAM:g} and {MAX_TOKENS_PER_PARAM:,g} (Chinchilla's rule is 20)"
            )


class ReplicatesSpec(Strict):
    """Seed replicates at chosen sizes: every variant and budget of those sizes again with each seed."""

    sizes: Annotated[list[Count], Field(min_length=1)] = Field(description="sizes of ladder.sizes to repeat")
    seeds: Annotated[list[Seed], Field(min_length=1)] = Field(
        description="the extra seeds; a run's one seed drives both its initialisation and its data order"
    )


class LadderSpec(Strict):
    """The rungs: sizes (or depths) at a tokens-per-parameter rule and its budgets, or IsoFLOP budgets."""

    mode: Literal["chinchilla", "isoflop"] = "chinchilla"
    sizes: Annotated[list[Count], Field(min_length=1)] | None = Field(
        default=None, description="target parameter counts, e.g. [50K, 100K, 200K, 400K]"
    )
    depths: Annotated[list[PositiveInt], Field(min_length=1)] | None = Field(
        default=None, description="n_layers per rung instead of sizes (d_model = aspect_ratio x n_layers)"
    )
    param_count: Literal["total", "non_embedding"] = Field(
        default="non_embedding", description="the convention sizes and tokens_per_param use"
    )
    tokens_per_param: PositiveFloat = 20.0
    budgets: Annotated[list[PositiveFloat], Field(min_length=1)] = Field(
        default_factory=lambda: [1.0],
        description="token budgets of every size as multiples of tokens_per_param, e.g. [0.5, 1, 2]; with "
        "schedule.kind wsd one trunk trains to the largest and each smaller budget is a cooldown branch off it, "
        "with other schedules each budget is an independent run",
    )
    replicates: ReplicatesSpec | None = Field(default=None, description="seed replicates at chosen sizes")
    compute_budgets: Annotated[list[Flops], Field(min_length=1)] | None = Field(
        default=None,
        description="isoflop: compute budgets in EXACT counted training FLOPs (flops_per_token x "
        "tokens, model/shape.py): each run of a budget trains budget / flops_per_token tokens, so it costs the budget",
    )
    isoflop_sizes: Annotated[list[Count], Field(min_length=3)] | None = Field(
        default=None, description="isoflop: an explicit size grid used at every budget"
    )
    isoflop_points: int = Field(default=5, ge=3, le=64, description="isoflop: sizes per budget when no grid is given")
    isoflop_span: float = Field(default=8.0, gt=1, le=1e4, description="isoflop: largest/smallest size per budget")
    extra_runs: list[ExtraRunSpec] | None = Field(
        default=None,
        description="runs beyond the grid, e.g. what `ladder plan STUDY_DIR --suggest --add` writes "
        "(ladder.studies.extra_runs)",
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        if isinstance(data, dict):
            if "multipliers" in data:
                raise ValueError(
                    "ladder.multipliers was renamed to ladder.budgets (the same multiples of tokens_per_param)"
                )
            # a dumped isoflop study holds the default budgets [1.0]; FLOP budgets are far larger
            if data.get("mode") == "isoflop" and data.get("budgets", [1.0]) != [1.0]:
                raise ValueError(
                    "isoflop mode's FLOP budgets were renamed to ladder.compute_budgets "
                    "(ladder.budgets are multiples of tokens_per_param, for mode: chinchilla)"
                )
        return data

    @model_validator(mode="after")
    def _one_way_to_size(self) -> LadderSpec:
        for name in ("sizes", "depths", "budgets", "compute_budgets", "isoflop_sizes"):
            _unique(getattr(self, name), name)
        _sane_tokens_per_param(self.tokens_per_param, self.budgets)
        if self.mode == "chinchilla":
            if (self.sizes is None) == (self.depths is None):
                raise ValueError("chinchilla mode needs exactly one of 'sizes' or 'depths'")
            if self.compute_budgets is not None:
                raise ValueError("'compute_budgets' belongs to mode: isoflop")
            if self.isoflop_sizes is not None:  # planned nothing of them, and said nothing
                raise ValueError(
                    "'isoflop_sizes' belongs to mode: isoflop (mode chinchilla trains 'sizes' or 'depths')"
                )
        else:
            if self.compute_budgets is None:
                raise ValueError("isoflop mode needs 'compute_budgets' (compute budgets in exact counted FLOPs)")
            if self.depths is not None or self.sizes is not None:
                raise ValueError("isoflop mode sizes each budget itself: use 'isoflop_sizes', not sizes/depths")
            if self.budgets != [1.0]:
                raise ValueError("'budgets' (multiples of tokens_per_param) belong to mode: chinchilla")
        if self.replicates is not None:
            _unique(self.replicates.sizes, "replicates.sizes")
            _unique(self.replicates.seeds, "replicates.seeds")
            if self.sizes is None:
                raise ValueError(
                    "'replicates' name sizes of 'sizes' (chinchilla mode with sizes); for other "
                    "ladders use ablations.seed"
                )
            unknown = [s for s in self.replicates.sizes if s not in self.sizes]
            if unknown:
                raise ValueError(f"replicates.sizes {unknown} are not in sizes {self.sizes}")
        check_extra_runs(self)
        for i, extra in enumerate(self.extra_runs or []):
            if self.mode == "chinchilla" and extra.budget is not None:
                # bounded as ladder.budgets are: 1e9 was planned as 2e10 tokens per parameter, a 3-million-day run
                ratio = self.tokens_per_param * extra.budget
                if not MIN_TOKENS_PER_PARAM <= ratio <= MAX_TOKENS_PER_PARAM:
                    raise ValueError(
                        f"extra_runs[{i}].budget = {plain_number(extra.budget)}: x tokens_per_param "
                        f"{plain_number(self.tokens_per_param)} is {plain_number(float(f'{ratio:.3g}'))} tokens per "
                        f"parameter; a budget must give between {MIN_TOKENS_PER_PARAM:g} and "
                        f"{MAX_TOKENS_PER_PARAM:,g} (Chinchilla's rule is 20)"
                    )
        return self


class AblationSpec(Strict):
    """Axes crossed with every rung. Each axis is optional; a learning-rate or batch axis is given either as
    absolute values or as multipliers of the recipe's rule, not both."""

    tie_embeddings: Annotated[list[bool], Field(min_length=1)] | None = None
    aspect_ratio: Annotated[list[AspectRatio], Field(min_length=1)] | None = Field(
        default=None, description="d_model / n_layers at equal parameter count (depth vs width)"
    )
    batch_tokens: Annotated[list[Count], Field(min_length=1)] | None = None
    batch_multipliers: Annotated[list[Multiplier], Field(min_length=1)] | None = None
    lr: Annotated[list[LearningRate], Field(min_length=1)] | None = None
    lr_multipliers: Annotated[list[Multiplier], Field(min_length=1)] | None = None
    seed: Annotated[list[Seed], Field(min_length=1)] | None = Field(
        default=None,
        description="seed replicates of every run (one seed drives initialisation and data order); "
        "not a variant: runs that differ only by seed are repeats of one configuration",
    )

    @model_validator(mode="after")
    def _one_form_per_axis(self) -> AblationSpec:
        for name in type(self).model_fields:
            _unique(getattr(self, name), name)
        if self.lr is not None and self.lr_multipliers is not None:
            raise ValueError("give 'lr' (absolute) or 'lr_multipliers' (of the rule), not both")
        if self.batch_tokens is not None and self.batch_multipliers is not None:
            raise ValueError("give 'batch_tokens' (absolute) or 'batch_multipliers' (of the rule), not both")
        return self

    def active(self) -> list[str]:
        return [name for name in type(self).model_fields if getattr(self, name) is not None]


class TrainingSpec(Strict):
    """The recipe. LR and batch default to documented rules of scale (``ladder.model.recipe``)."""

    lr: LearningRate | Auto = "auto"
    lr_rule: Literal["olmo", "deepseek"] = "olmo"
    lr_scale: Multiplier = Field(default=1.0, description="multiplies the rule")
    lr_max: LearningRate | None = Field(default=None, description="clamp for tiny models")
    batch_tokens: Count | Auto = "auto"
    batch_rule: Literal["olmo", "deepseek"] = "olmo"
    batch_scale: Multiplier = 1.0
    batch_min_sequences: PositiveInt = 8
    batch_max_tokens: Count | None = None
    micro_batch_tokens: Count = Field(
        default=16384,
        description="largest forward pass (memory); accumulation does the rest, the last chunk "
        "smaller when it does not divide the batch. Not part of a run's id: changing it keeps finished runs",
    )
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    optimizer: OptimizerConfig = Field(default_factory=OptimizerConfig)
    grad_clip: PositiveFloat | None = 1.0
    precision: Literal["auto", "fp32", "bf16"] = Field(
        default="auto",
        description="'auto': the plan writes what executor.hardware trains in (fp32 on cpu, bf16 "
        "on GPUs); the resolved value is part of each run's id",
    )
    compile: bool | Auto = Field(
        default="auto",
        description="torch.compile of the decoder layers: true, false, or auto (on CPU, the runs "
        "whose faster steps pay back the compile time; on GPUs none until measured: ladder.plan.compiling); not "
        "part of a run's id (same computation)",
    )
    seed: Seed = Field(default=0, description="one seed per run drives both its initialisation and its data order")
    evals_per_run: PositiveInt = 10
    eval_tokens: Count = 65536
    logs_per_run: PositiveInt = 100
    checkpoints_per_run: PositiveInt = 10
    checkpoint_minutes: PositiveFloat = 10.0
    divergence: DivergenceConfig = Field(default_factory=DivergenceConfig)


class HeroSpec(Strict):
    """The big run the ladder rehearses: params (and tokens), or a compute budget."""

    params: Count | None = Field(default=None, description="in the ladder's param_count convention")
    tokens: Count | None = Field(default=None, description="default: tokens_per_param x params")
    compute: Flops | None = Field(
        default=None,
        description="EXACT counted training FLOPs (flops_per_token x tokens of the hero's shape, not "
        "6ND); the plan splits it by tokens_per_param, the fit by its compute-optimal allocation",
    )
    tied: bool | None = None
    aspect_ratio: AspectRatio | None = None
    seq_len: PositiveInt | None = Field(default=None, le=1_048_576)

    @model_validator(mode="after")
    def _params_or_compute(self) -> HeroSpec:
        if (self.params is None) == (self.compute is None):
            raise ValueError("give the hero's 'params' (and optionally 'tokens') or its 'compute', exactly one")
        if self.compute is not None and self.tokens is not None:
            raise ValueError("'tokens' goes with 'params'; with 'compute' the fit chooses the allocation")
        return self


# Bounds of the executor's numbers (generous: they refuse only what no machine has, e.g. a 1e23-minute job)
MAX_TIME_MIN = 366 * 24 * 60  # a year
MAX_GPUS_PER_RUN = 1024
MAX_CPUS_PER_RUN = 65_536
MAX_MEM_GB = 1_000_000.0  # a petabyte
MAX_RUNS_AT_ONCE = 1_000_000


class SlurmSpec(Strict):
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    time_min: PositiveInt = Field(default=60, le=MAX_TIME_MIN)
    gpus_per_task: int = Field(default=0, ge=0, le=MAX_GPUS_PER_RUN)
    cpus_per_task: PositiveInt = Field(default=1, le=MAX_CPUS_PER_RUN)
    mem_gb: PositiveFloat | None = Field(default=None, le=MAX_MEM_GB)
    constraint: str | None = None
    array_parallelism: PositiveInt = Field(default=32, le=MAX_RUNS_AT_ONCE)
    additional: dict[Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z][\w-]*$")], str | int | float | bool] = (
        Field(default_factory=dict, description="extra sbatch options, e.g. {exclusive: true}")
    )


class LocalSpec(Strict):
    """Local workers. Fields left unset follow the plan's packing rule (``ladder.plan.packing``)."""

    gpus: list[Annotated[int, Field(ge=0, lt=MAX_GPUS_PER_RUN)]] | None = Field(
        default=None, description="GPU ids; none: CPU"
    )
    runs_per_gpu: PositiveInt | None = Field(
        default=None, le=MAX_RUNS_AT_ONCE, description="runs sharing one GPU; default: 1"
    )
    cpus_per_run: PositiveInt | None = Field(
        default=None, le=MAX_CPUS_PER_RUN, description="threads per run; default: cores / runs at once"
    )
    parallel: PositiveInt | None = Field(
        default=None,
        le=MAX_RUNS_AT_ONCE,
        description="CPU runs at once; default: one per core (as many as fit in memory)",
    )

    @model_validator(mode="after")
    def _check(self) -> LocalSpec:
        _unique(self.gpus, "gpus")  # runs share a GPU with runs_per_gpu, not by its id given twice
        return self


class ExecutorSpec(Strict):
    kind: Literal["local", "slurm", "debug"] = "local"
    hardware: Literal["cpu", "a100", "h100", "h200", "l40s", "a10g", "v100"] = Field(
        default="cpu",
        description="what a run trains on: the plan's wall-time estimate, and the precision "
        "that training.precision 'auto' resolves to (fp32 on cpu, bf16 on GPUs)",
    )
    slurm: SlurmSpec = Field(default_factory=SlurmSpec)
    local: LocalSpec = Field(default_factory=LocalSpec)


def not_whole_examples(limit: float) -> bool:
    """An lm-eval limit from 1 up that is no whole number of examples (lm-eval takes int(limit): 2.5 was silently
    2) or past 1e12 (1e308 overflows its islice); below 1 a limit is a share of each task."""
    return limit >= 1 and (limit != int(limit) or limit > 1e12)


class EvalSpec(Strict):
    """Downstream evaluation that ``ladder run`` does after training (lm-evaluation-harness)."""

    tasks: Annotated[list[str], Field(min_length=1)] | None = Field(
        default=None, description="lm-eval task names; default: the shipped offline tasks"
    )
    include_path: str | None = Field(default=None, description="a folder of your own lm-eval task YAMLs")
    limit: PositiveFloat | None = Field(default=None, description="examples per task (a fraction when below 1)")

    @field_validator("limit")
    @classmethod
    def _whole_from_one(cls, limit: float | None) -> float | None:
        if limit is not None and not_whole_examples(limit):  # as `ladder eval --limit` is refused
            raise ValueError(
                "from 1 up, a whole number of examples per task (at most 1e12); below 1, a share of each task"
            )
        return limit


class StudySpec(Strict):
    name: str = Field(min_length=1, max_length=200)
    description: str = ""
    notes: str | None = None
    data: DataConfig = Field(default_factory=DataConfig)
    model: FamilySpec = Field(default_factory=FamilySpec)
    ladder: LadderSpec
    ablations: AblationSpec = Field(default_factory=AblationSpec)
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    hero: HeroSpec
    executor: ExecutorSpec = Field(default_factory=ExecutorSpec)
    sanity_check: bool = Field(default=True, description="`ladder run` overfits a tiny set before the ladder")
    evals: EvalSpec | None = Field(default=None, description="`ladder run` evaluates every finished run with lm-eval")
    tracking: TrackingConfig = Field(
        default_factory=TrackingConfig,
        description="an experiment tracker (TensorBoard "
        "or W&B) that every run logs its config, hardware and metrics to",
    )

    @field_validator("name")
    @classmethod
    def _not_blank(cls, name: str) -> str:
        if not name.strip():  # "   " once passed, planned as ./ladder-runs/study, while "" was refused
            raise ValueError("a study's name must not be blank (only spaces)")
        return name

    @model_validator(mode="after")
    def _cross_checks(self) -> StudySpec:
        if self.model.ffn_multiple > 4 * self.model.head_dim * 64:
            raise ValueError("model.ffn_multiple is implausibly large")
        if self.ladder.depths is not None and self.ablations.aspect_ratio is None and self.model.aspect_ratio <= 0:
            raise ValueError("depths need a positive model.aspect_ratio")
        rep = self.ladder.replicates
        own = self.ablations.seed or [self.training.seed]
        again = [s for s in rep.seeds if s in own] if rep is not None else []
        if again:  # the planner merges such a "replicate" into the run itself: the study would have no replicate
            where = f"ablations.seed {own}" if self.ablations.seed else f"training.seed {own[0]}"
            raise ValueError(
                f"ladder.replicates.seeds {again} repeat the study's own seed ({where}): a replicate needs another seed"
            )
        return self

    @property
    def seeds_vary(self) -> bool:
        """Whether runs of this study differ by seed (then every run records its seed as an axis)."""
        return self.ladder.replicates is not None or self.ablations.seed is not None

    @property
    def hero_context_warning(self) -> str | None:
        """The warning for a hero whose context (hero.seq_len) is not the ladder's: its loss per token is not the
        quantity the ladder's laws forecast. None when the two agree."""
        hero, ladder = self.hero.seq_len, self.data.seq_len
        if hero is None or hero == ladder:
            return None
        return (
            f"hero.seq_len {hero} is not the ladder's data.seq_len {ladder}: the laws are fitted on eval losses at a "
            f"{ladder}-token context, and the forecast reads the hero's loss as theirs (a {'longer' if hero > ladder else 'shorter'} "
            f"context {'lowers' if hero > ladder else 'raises'} the loss per token); only the hero's FLOPs count its "
            f"{hero}-token context. Train the ladder at {hero} tokens to forecast it"
        )

    @property
    def slug(self) -> str:
        """The study's name made safe for a directory name."""
        # letters of any script stay (\w): "名前" once became "study" and "ünï" "n", so that two such studies
        # shared ./ladder-runs/study; ASCII names get the same slug as before
        slug = re.sub(r"[^\w.-]+", "-", self.name).strip("-.")
        return slug or "study"

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


# ---- loading ---------------------------------------------------------------------------------------------


def parse_study(data: Any, source: str = "study") -> StudySpec:
    if not isinstance(data, dict):
        if data is None:  # an empty file (or only comments): "got NoneType" said it in Python's words
            raise SpecError(
                f"{source}: the file is empty; a study is a mapping of fields (`ladder studies show default`)"
            )
        got = {list: "a list", str: "a text", int: "a number", float: "a number", bool: "a boolean"}
        raise SpecError(
            f"{source}: the top level must be a mapping of fields (name: ..., ladder: ...), got "
            f"{got.get(type(data), type(data).__name__)}"
        )
    try:
        return StudySpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(pydantic_message(exc, StudySpec, source)) from None


def not_a_study_file(path: Path) -> str:
    """Why ``path``, which is not a regular file, cannot be read as a study file: it does not exist, or it is a
    directory or a device, pipe or socket (``/dev/null`` once read as "no such study file")."""
    path = Path(path)
    if not path.exists():
        return f"{path}: no such study file"
    kind = "a directory" if path.is_dir() else "a device, pipe or socket"
    return f"{path}: not a regular file ({kind}); give a study YAML file"


def read_study_file(path: Path) -> StudySpec:
    path = Path(path)
    if not path.is_file():
        raise SpecError(not_a_study_file(path))
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except StudyYamlError as exc:
        raise SpecError(f"{path}: {exc}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(f"{path}: invalid YAML{where}: {problem}") from None
    except UnicodeDecodeError:
        raise SpecError(f"{path}: not a UTF-8 text file") from None
    except RecursionError:  # PyYAML composes nested [ and { by recursion: a RecursionError traceback
        raise SpecError(f"{path}: nested too deeply to be a study (hundreds of levels of [ or {{)") from None
    return parse_study(data, str(path))
