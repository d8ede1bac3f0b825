"""The `ladder` command line. Thin: parse, call one library function, render with rich or print JSON.

A ``LadderError`` (the user's to fix) prints one line and exits 2; any other exception is a bug in ladder
and exits 1 with its traceback.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from ladder import __version__
from ladder.console import err, human_seconds, out, print_json, sci
from ladder.errors import LadderError

app = typer.Typer(
    name="ladder",
    help="Rehearse a big pretraining run on a scaling ladder of small Llama runs: "
    "plan -> submit -> status -> collect -> fit -> report. `ladder run` does it all.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
studies_app = typer.Typer(help="List, show and validate study specs.", no_args_is_help=True)
model_app = typer.Typer(help="Parameter and FLOP accounting of Llama shapes.", no_args_is_help=True)
data_app = typer.Typer(help="Tokenizers and tokenized corpora (cached, shared by every study).", no_args_is_help=True)
tokenizer_app = typer.Typer(help="Train and evaluate byte-level BPE tokenizers.", no_args_is_help=True)
app.add_typer(studies_app, name="studies")
app.add_typer(model_app, name="model")
app.add_typer(data_app, name="data")
data_app.add_typer(tokenizer_app, name="tokenizer")

JSON_OPT = typer.Option(False, "--json", help="Print machine-readable JSON only.")


def _version(value: bool) -> None:
    if value:
        out.print(f"ladder {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    """Rehearse a big pretraining run on a scaling ladder of small Llama runs."""


# ---- studies ---------------------------------------------------------------------------------------


@studies_app.command("list")
def studies_list(as_json: bool = JSON_OPT) -> None:
    """List the built-in studies with their descriptions."""
    from ladder.studies import builtin_names, load_study

    rows = []
    for name in builtin_names():
        s = load_study(name)
        rows.append({"name": name, "description": s.description, "runs": None})
    if as_json:
        print_json({"studies": rows})
        return
    table = Table("name", "description", title="built-in studies")
    for r in rows:
        table.add_row(r["name"], r["description"])
    out.print(table)


@studies_app.command("show")
def studies_show(name: str = typer.Argument(..., help="A built-in study name or a study YAML file.")) -> None:
    """Print a study as YAML, every default filled in (a starting point for your own study file)."""
    from ladder.studies import load_study

    sys.stdout.write(load_study(name).to_yaml())


@studies_app.command("validate")
def studies_validate(
    file: str = typer.Argument(..., help="Study YAML file (or built-in name) to check."),
    as_json: bool = JSON_OPT,
) -> None:
    """Check a study file without writing anything; a bad field exits 2 naming the field and the value."""
    from ladder.plan import expand
    from ladder.studies import load_study

    study = load_study(file)
    plan = expand(study)
    if as_json:
        print_json({"valid": True, "name": study.name, "runs": len(plan.runs)})
        return
    out.print(f"[green]ok[/]: {study.name!s} is valid ({len(plan.runs)} runs)")


# ---- model info ------------------------------------------------------------------------------------


@model_app.command("info")
def model_info(
    d_model: Optional[int] = typer.Option(None, "--d-model", help="Hidden size."),
    n_layers: Optional[int] = typer.Option(None, "--n-layers", help="Number of layers."),
    n_heads: Optional[int] = typer.Option(None, "--n-heads", help="Query heads (default d_model / head_dim)."),
    n_kv_heads: Optional[int] = typer.Option(None, "--n-kv-heads", help="KV heads (default n_heads / kv_ratio)."),
    head_dim: Optional[int] = typer.Option(None, "--head-dim", help="Head dimension (default d_model / n_heads or 64)."),
    ffn_dim: Optional[int] = typer.Option(None, "--ffn-dim", help="SwiGLU width (default 8/3 d_model, rounded)."),
    vocab_size: int = typer.Option(49152, "--vocab-size"),
    tied: bool = typer.Option(True, "--tied/--untied", help="Tie the LM head to the input embedding."),
    seq_len: int = typer.Option(2048, "--seq-len", help="Context length for the attention FLOPs."),
    params: Optional[str] = typer.Option(
        None, "--params", help="Instead of a shape: a target size such as 135M, sized at --aspect-ratio."
    ),
    convention: str = typer.Option("total", "--convention", help="total | non_embedding, for --params."),
    aspect_ratio: float = typer.Option(32.0, "--aspect-ratio", help="d_model / n_layers, for --params."),
    kv_ratio: int = typer.Option(1, "--kv-ratio", help="Query heads per KV head, for --params."),
    as_json: bool = JSON_OPT,
) -> None:
    """Parameter counts (total / embedding / non-embedding) and training FLOPs per token of a shape.

    Give an explicit shape (--d-model --n-layers ...) or a target size (--params 135M --aspect-ratio 19.2).
    Example: the SmolLM2-135M shape, `ladder model info --d-model 576 --n-layers 30 --n-heads 9
    --n-kv-heads 3 --ffn-dim 1536 --vocab-size 49152` has 134,515,008 parameters tied.
    """
    from pydantic import ValidationError

    from ladder.errors import SpecError
    from ladder.model.config import parse_count
    from ladder.model.shape import ModelShape
    from ladder.model.sizing import FamilyRules, shape_for_params

    try:
        if params is not None:
            if d_model is not None or n_layers is not None:
                raise SpecError("give either an explicit shape (--d-model, --n-layers) or --params, not both")
            if convention not in ("total", "non_embedding"):
                raise SpecError(f"--convention {convention!r}: must be 'total' or 'non_embedding'")
            target = parse_count(params)
            if not isinstance(target, (int, float)) or target <= 0:
                raise SpecError(f"--params {params!r}: must be a positive count such as 50K, 135M or 7e9")
            rules = FamilyRules(
                vocab_size=vocab_size,
                head_dim=head_dim or 64,
                kv_ratio=kv_ratio,
                max_seq_len=seq_len,
            )
            shape = shape_for_params(int(target), convention, aspect_ratio, rules, tied)
        else:
            if d_model is None or n_layers is None:
                raise SpecError("give --d-model and --n-layers (or --params with --aspect-ratio)")
            hd = head_dim or (d_model // n_heads if n_heads else 64)
            heads = n_heads or max(1, d_model // hd)
            shape = ModelShape(
                d_model=d_model,
                n_layers=n_layers,
                n_heads=heads,
                n_kv_heads=n_kv_heads or heads,
                head_dim=hd,
                ffn_dim=ffn_dim or max(16, int(round(8 * d_model / 3 / 16)) * 16),
                vocab_size=vocab_size,
                tied=tied,
                max_seq_len=seq_len,
            )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "shape"
        raise SpecError(f"{field}: {first['msg']}") from None
    info = shape.accounting(seq_len)
    if as_json:
        print_json(info)
        return
    table = Table("quantity", "value", title=f"Llama {shape.describe()} ffn {shape.ffn_dim} vocab {shape.vocab_size}"
                  f" {'tied' if shape.tied else 'untied'}")
    table.add_row("params total", f"{info['params_total']:,}")
    table.add_row("params embedding", f"{info['params_embedding']:,}")
    table.add_row("params non-embedding", f"{info['params_non_embedding']:,}")
    table.add_row(f"FLOPs/token (train, seq {seq_len}, head + causal attention)", f"{info['flops_per_token']:,}")
    table.add_row("FLOPs/token 6N (N = params total)", f"{info['flops_per_token_6n']:,}")
    out.print(table)


# ---- plan ------------------------------------------------------------------------------------------


@app.command()
def plan(
    study: str = typer.Argument(..., help="A study YAML file or a built-in study name (see `ladder studies list`)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Study directory (default ./ladder-runs/<name>)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the plan, write nothing."),
    as_json: bool = JSON_OPT,
) -> None:
    """Expand a study into runs and write a directory per run, named by the hash of its spec.

    Prints each run's shape, size, tokens, FLOPs, batch, LR, steps and estimated wall time, and the
    ladder's cost as a percentage of the hero's compute. Planning again is a no-op; adding a value to an
    axis adds only the new runs; nothing is ever deleted.
    """
    from ladder.plan import default_study_dir, expand, run_row, write_plan
    from ladder.studies import load_study

    spec = load_study(study)
    p = expand(spec)
    target = out_dir or default_study_dir(spec)
    written = None if dry_run else write_plan(p, target)
    rows = [run_row(r, None if dry_run else target, p.estimates_s[r.run_id]) for r in p.runs]
    totals = p.totals()
    if as_json:
        payload = {"study": spec.name, "study_dir": None if dry_run else str(target), "dry_run": dry_run,
                   "runs": rows, "totals": totals, "hero": p.hero.to_dict()}
        if written:
            payload.update(new=written.new, existing=written.existing, orphans=written.orphans)
        print_json(payload)
        return
    conv = spec.ladder.param_count
    table = Table(
        "run", "variant", "axes", "shape", f"params ({conv})", "tokens", "tok/param", "FLOPs", "batch", "LR",
        "steps", "est. time", title=f"plan: {spec.name}", title_justify="left",
    )
    for r in rows:
        shape = r["shape"]
        axes = ", ".join(f"{k}={v}" for k, v in r["axes"].items() if k not in ("size",))
        table.add_row(
            r["run_id"], r["variant"], axes or r["axes"].get("size", ""),
            f"{shape['d_model']}x{shape['n_layers']} h{p.runs[rows.index(r)].shape.n_heads}/"
            f"{p.runs[rows.index(r)].shape.n_kv_heads}",
            f"{r['params']:,}", f"{r['tokens']:,}", f"{r['tokens_per_param']:.1f}", sci(r["flops"]),
            f"{r['batch_tokens']:,}", f"{r['lr']:.2e}", f"{r['steps']:,}", human_seconds(r["est_wall_s"]),
        )
    out.print(table)
    h = p.hero
    out.print(
        f"totals: {totals['runs']} runs, {sci(totals['flops'])} FLOPs, {totals['tokens']:,} tokens, "
        f"~{human_seconds(totals['est_wall_s'])} of {spec.executor.hardware} time (one run at a time)"
    )
    out.print(
        f"hero: {h.params:,} params ({conv}), {h.tokens:,} tokens, {sci(h.compute)} FLOPs; "
        f"the ladder costs {totals['ladder_pct_of_hero']:.3g}% of the hero's compute"
    )
    if dry_run:
        out.print("[yellow]dry run[/]: nothing written")
    elif written is not None:
        out.print(
            f"wrote {written.study_dir}: {len(written.new)} new runs, {len(written.existing)} already planned"
            + (f", {len(written.orphans)} run directories of earlier plans kept" if written.orphans else "")
        )


# ---- data ------------------------------------------------------------------------------------------

CORPUS_HELP = "A jsonl/parquet file or folder, a folder of .txt files, `embedded`, or hf:<dataset>[:<config>]."


@tokenizer_app.command("train")
def tokenizer_train(
    corpus: str = typer.Argument(..., help=CORPUS_HELP),
    vocab_size: int = typer.Option(..., "--vocab-size", help="Ids in the vocabulary, special tokens included."),
    out_dir: Path = typer.Option(..., "--out", help="Folder to save the tokenizer in (loadable by transformers)."),
    text_key: str = typer.Option("text", "--text-key", help="Column/key holding the text."),
    max_bytes: Optional[str] = typer.Option(None, "--max-bytes", help="Read at most this much text, e.g. 64M."),
    validation_fraction: float = typer.Option(0.02, "--validation-fraction",
                                              help="Documents held out (never trained on), as in a study."),
    as_json: bool = JSON_OPT,
) -> None:
    """Train a byte-level BPE (EOS and pad special tokens) on a corpus's training documents."""
    import time

    from ladder.errors import SpecError
    from ladder.model.config import parse_count
    from ladder.model.corpus import iter_corpus_texts
    from ladder.model.tokenizer import describe_tokenizer, train_tokenizer

    cap = parse_count(max_bytes) if max_bytes else None
    if cap is not None and (not isinstance(cap, (int, float)) or cap <= 0):
        raise SpecError(f"--max-bytes {max_bytes!r}: must be a positive size such as 64M")
    if vocab_size < 259:
        raise SpecError(f"--vocab-size {vocab_size}: a byte-level BPE needs at least 259 ids (256 bytes + specials)")
    start = time.perf_counter()
    texts = iter_corpus_texts(corpus, text_key, split="train", validation_fraction=validation_fraction,
                              max_bytes=int(cap) if cap else None)
    path = train_tokenizer(texts, vocab_size, out_dir)
    info = {"tokenizer": str(path), "seconds": time.perf_counter() - start, **describe_tokenizer(path)}
    if as_json:
        print_json(info)
        return
    out.print(f"trained a {info.get('vocab_size', vocab_size)}-id byte-level BPE in {info['seconds']:.1f}s: "
              f"{out_dir.resolve()}")


@tokenizer_app.command("eval")
def tokenizer_eval(
    tokenizer_dir: Path = typer.Argument(..., help="A tokenizer folder (or tokenizer.json)."),
    corpus: str = typer.Argument(..., help=CORPUS_HELP),
    text_key: str = typer.Option("text", "--text-key"),
    max_bytes: str = typer.Option("8M", "--max-bytes", help="Evaluate on at most this much held-out text."),
    validation_fraction: float = typer.Option(0.02, "--validation-fraction"),
    as_json: bool = JSON_OPT,
) -> None:
    """Bytes per token, tokens per word, vocabulary usage and exact round trip on held-out text."""
    from ladder.errors import DataError
    from ladder.model.config import parse_count
    from ladder.model.corpus import iter_corpus_texts
    from ladder.model.tokenizer import evaluate_tokenizer

    cap = int(parse_count(max_bytes))
    texts = list(iter_corpus_texts(corpus, text_key, split="validation", validation_fraction=validation_fraction,
                                   max_bytes=cap))
    if not texts:
        raise DataError(f"{corpus}: no held-out documents to evaluate on (try a larger --validation-fraction)")
    m = evaluate_tokenizer(tokenizer_dir, texts)
    if as_json:
        print_json(m)
        return
    table = Table("metric", "value", title=f"tokenizer {tokenizer_dir} on {m['texts']:,} held-out documents")
    table.add_row("bytes per token", f"{m['bytes_per_token']:.3f}")
    table.add_row("tokens per word", f"{m['tokens_per_word']:.3f}")
    table.add_row("vocabulary used", f"{m['vocab_used']:,}/{m['vocab_size']:,} ({100 * m['vocab_usage']:.1f}%)")
    table.add_row("exact round trip", "yes" if m["roundtrip_ok"] else f"NO ({m['roundtrip_failures']} texts)")
    out.print(table)
    if not m["roundtrip_ok"]:
        raise typer.Exit(1)


@data_app.command("prepare")
def data_prepare(
    study: str = typer.Argument(..., help="A study YAML file, built-in name or planned study directory."),
    workers: Optional[int] = typer.Option(None, "--workers", help="Tokenization tasks at once (default: CPUs)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Tokenize a study's corpus into cached datatrove shards (resumable).

    The result is shared by every study that uses the same corpus and tokenizer."""
    from ladder.model.data import describe, prepare_data
    from ladder.studies import load_study

    spec = load_study(study)
    prepared = prepare_data(spec.data, spec.model.vocab_size, workers=workers, progress=not as_json)
    info = describe(prepared)
    if as_json:
        print_json(info)
        return
    out.print(
        f"data ready: {prepared.train_tokens:,} train and {prepared.val_tokens:,} validation tokens, "
        f"vocabulary {prepared.vocab_size:,} ({prepared.root})"
    )


@app.command()
def sanity(
    study: str = typer.Argument("default", help="A study YAML file, built-in name or planned study directory."),
    break_labels: bool = typer.Option(False, "--break-labels", help="Deliberately train on unshifted labels, "
                                      "to see the check catch a label-shift bug (a test of the check itself)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Overfit ~100 short documents with the study's smallest model: the first debugging test.

    Passes when the loss on memorizable tokens falls below 0.05 nats/token and greedy generation reproduces
    the documents; also checks the initial loss (near ln vocab) and that every parameter gets a gradient. On
    failure it names the suspect stage. Exits 1 when the check fails.
    """
    from ladder.model.data import prepare_data
    from ladder.model.sanity import run_sanity
    from ladder.plan import expand
    from ladder.studies import load_study

    spec = load_study(study)
    prepared = prepare_data(spec.data, spec.model.vocab_size, progress=not as_json)
    smallest = min(expand(spec).runs, key=lambda r: r.shape.params_total).shape
    report = run_sanity(prepared, smallest, label_shift_bug=break_labels)
    if as_json:
        print_json(report.to_dict())
    else:
        out.print(report.summary())
    if not report.passed:
        raise typer.Exit(1)


# ---- running the ladder ----------------------------------------------------------------------------

EXECUTOR_HELP = "slurm | local | debug (default: the study's executor.kind)."


def _executor_spec(
    study_dir: Path,
    kind: Optional[str],
    overrides: dict,
):
    """The study's executor section with the command line's options laid over it, validated."""
    from pydantic import ValidationError

    from ladder.errors import SpecError
    from ladder.plan import read_plan
    from ladder.studies.spec import ExecutorSpec

    study, _ = read_plan(study_dir)
    data = study.executor.model_dump()
    if kind is not None:
        data["kind"] = kind
    for section, values in overrides.items():
        data[section].update({k: v for k, v in values.items() if v is not None})
    try:
        return ExecutorSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"])
        raise SpecError(f"executor.{field} = {first.get('input')!r}: {first['msg']}") from None


def _parse_sbatch(pairs: list[str]) -> dict:
    from ladder.errors import SpecError

    extra = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise SpecError(f"--sbatch {pair!r}: use KEY=VALUE, e.g. --sbatch exclusive=true")
        extra[key.strip().lstrip("-")] = value
    return extra


def _parse_gpus(gpus: Optional[str]) -> Optional[list[int]]:
    from ladder.errors import SpecError

    if gpus is None:
        return None
    try:
        return [int(g) for g in gpus.split(",") if g.strip()]
    except ValueError:
        raise SpecError(f"--gpus {gpus!r}: use GPU ids separated by commas, e.g. --gpus 0,1") from None


@app.command()
def train(
    run_dir: Path = typer.Argument(..., help="A run directory written by `ladder plan` (holds spec.json)."),
    threads: Optional[int] = typer.Option(None, "--threads", help="CPU threads (default: torch's choice)."),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda, cuda:1 (default: cuda if available)."),
) -> None:
    """Train one planned run in the foreground, preparing its data through the shared cache first.

    Resumes from the run's checkpoint if there is one. Ctrl-C (or SIGTERM/SIGUSR2) finishes the step in
    flight, writes a checkpoint and exits; run the command again to continue.
    """
    from ladder import layout
    from ladder.errors import StateError
    from ladder.jobs import run_one
    from ladder.model.train import Preempted

    rd = layout.RunDir(run_dir)
    if not rd.spec.is_file():
        raise StateError(f"{run_dir} is not a run directory (no {layout.SPEC}); run `ladder plan` first")
    try:
        result = run_one(rd.path, threads=threads, device=device, progress=True)
    except Preempted as exc:
        err.print(f"[yellow]stopped[/]: {exc}; run `ladder train {run_dir}` again to resume")
        raise typer.Exit(exc.exit_code) from None
    if result.get("status") == "busy":
        raise StateError(f"{run_dir} is being trained by another process (pid in {rd.lock})")
    out.print(
        f"{result.get('status')}: final eval loss {result.get('final_eval_loss')}, "
        f"train loss {result.get('final_train_loss')}, {result.get('tokens'):,} tokens in "
        f"{human_seconds(result.get('wall_time_s'))}"
    )
    if result.get("status") != "done":
        raise typer.Exit(1)


@app.command()
def submit(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    executor: Optional[str] = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    run: Optional[list[str]] = typer.Option(None, "--run", help="Only this run id (repeatable)."),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="Also resubmit failed runs."),
    partition: Optional[str] = typer.Option(None, help="SLURM partition."),
    account: Optional[str] = typer.Option(None, help="SLURM account."),
    qos: Optional[str] = typer.Option(None, help="SLURM QOS."),
    time_min: Optional[int] = typer.Option(None, "--time-min", help="SLURM time limit per job, minutes."),
    gpus_per_task: Optional[int] = typer.Option(None, "--gpus-per-task", help="SLURM GPUs per run."),
    cpus_per_task: Optional[int] = typer.Option(None, "--cpus-per-task", help="SLURM CPUs per run."),
    mem_gb: Optional[float] = typer.Option(None, "--mem-gb", help="SLURM memory per run, GB."),
    constraint: Optional[str] = typer.Option(None, help="SLURM constraint."),
    array_parallelism: Optional[int] = typer.Option(None, "--array-parallelism", help="SLURM array tasks at once."),
    sbatch: Optional[list[str]] = typer.Option(None, "--sbatch", help="Extra sbatch option KEY=VALUE (repeatable)."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="Local: GPU ids, e.g. 0,1 (none: CPU)."),
    runs_per_gpu: Optional[int] = typer.Option(None, "--runs-per-gpu", help="Local: runs sharing one GPU."),
    cpus_per_run: Optional[int] = typer.Option(None, "--cpus-per-run", help="Local: threads per run."),
    parallel: Optional[int] = typer.Option(None, "--parallel", help="Local CPU: runs at once."),
    as_json: bool = JSON_OPT,
) -> None:
    """Submit every unfinished run once: SLURM job arrays, local workers, or in-process debug.

    Runs that are done or whose jobs are alive are skipped, so submitting again submits nothing;
    `--retry-failed` resubmits failed runs; interrupted and cancelled runs resume from their checkpoints.
    Job ids are recorded in the study's jobs.json.
    """
    from ladder.submit import submit as do_submit

    ex = _executor_spec(
        study_dir,
        executor,
        {
            "slurm": dict(partition=partition, account=account, qos=qos, time_min=time_min,
                          gpus_per_task=gpus_per_task, cpus_per_task=cpus_per_task, mem_gb=mem_gb,
                          constraint=constraint, array_parallelism=array_parallelism,
                          additional=_parse_sbatch(sbatch or []) or None),
            "local": dict(gpus=_parse_gpus(gpus), runs_per_gpu=runs_per_gpu, cpus_per_run=cpus_per_run,
                          parallel=parallel),
        },
    )
    result = do_submit(study_dir, ex, run_ids=run, retry_failed=retry_failed)
    if as_json:
        print_json(result.to_dict())
        return
    for run_id in result.submitted:
        out.print(f"submitted {run_id} ({ex.kind}, job {','.join(result.job_ids.get(run_id, []))})")
    for run_id, why in result.skipped.items():
        out.print(f"[dim]skipped {run_id}: {why}[/]")
    out.print(f"{len(result.submitted)} submitted, {len(result.skipped)} skipped; follow with `ladder status {study_dir} --watch`")


def _status_table(rows, title: str) -> Table:
    table = Table("run", "variant", "size", "state", "progress", "train loss", "eval loss", "tok/s", "ETA", "job",
                  title=title, title_justify="left")
    colours = {"done": "green", "failed": "red", "diverged": "red", "running": "cyan", "queued": "yellow",
               "cancelled": "magenta", "interrupted": "yellow"}
    for r in rows:
        state = f"[{colours.get(r.state, 'white')}]{r.state}[/]"
        if r.error:
            state += f"\n[dim]{r.error[:80]}[/]"
        table.add_row(
            r.run_id, r.variant, r.size, state,
            f"{r.tokens_done:,}/{r.tokens_planned:,} ({100 * r.progress:.0f}%)",
            f"{r.train_loss:.4f}" if r.train_loss is not None else "-",
            f"{r.eval_loss:.4f}" if r.eval_loss is not None else "-",
            f"{r.tokens_per_s:,.0f}" if r.tokens_per_s else "-",
            human_seconds(r.eta_s), r.job_id or "-",
        )
    return table


def _totals_line(t: dict) -> str:
    states = ", ".join(f"{n} {s}" for s, n in t["states"].items() if n)
    return f"{t['runs']} runs: {states}; {t['tokens_done']:,}/{t['tokens_planned']:,} tokens ({100 * t['progress']:.0f}%)"


@app.command()
def status(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    watch: bool = typer.Option(False, "--watch", help="Keep a live display until every run has ended."),
    interval: float = typer.Option(2.0, "--interval", help="Seconds between refreshes with --watch."),
    as_json: bool = JSON_OPT,
) -> None:
    """Show each run's state, progress, losses, throughput, ETA and job id.

    States: planned, queued, running, interrupted (resumable), done, failed, diverged, cancelled; a failed
    run shows its error. Totals follow the table."""
    from ladder.status import study_status, totals, wait

    if watch and not as_json:
        from rich.console import Group
        from rich.live import Live

        with Live(console=out, refresh_per_second=2) as live:
            def show(rows):
                live.update(Group(_status_table(rows, f"status: {study_dir}"), _totals_line(totals(rows))))

            rows = wait(study_dir, poll_s=interval, on_update=show)
        return
    rows = study_status(study_dir)
    if as_json:
        print_json({"runs": [r.to_dict() for r in rows], "totals": totals(rows)})
        return
    out.print(_status_table(rows, f"status: {study_dir}"))
    out.print(_totals_line(totals(rows)))


@app.command()
def collect(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    as_json: bool = JSON_OPT,
) -> None:
    """Gather finished runs into results.parquet/.csv and their curves into curves.parquet.

    Reads only the files the runs wrote; a run with missing or corrupt files is reported and left out."""
    from ladder.collect import collect as do_collect
    from ladder.collect import write_collected

    c = do_collect(study_dir)
    paths = write_collected(study_dir, c)
    payload = {
        "rows": len(c.runs),
        "files": [str(p) for p in paths],
        "problems": [{"run_id": p.run_id, "file": p.file, "what": p.what} for p in c.problems],
        "pending": c.pending,
        "failed": c.failed,
    }
    if as_json:
        print_json(payload)
        return
    for p in c.problems:
        err.print(f"[yellow]left out[/] {p}")
    if c.failed:
        err.print(f"[red]{len(c.failed)} runs failed[/] (see `ladder status {study_dir}`): {', '.join(c.failed)}")
    if c.pending:
        out.print(f"{len(c.pending)} runs not finished yet: {', '.join(c.pending)}")
    out.print(f"collected {len(c.runs)} runs into {paths[0]} (and .csv, {paths[2].name})")


@app.command()
def cancel(
    study_dir: Path = typer.Argument(..., help="A planned study directory."),
    run: Optional[list[str]] = typer.Option(None, "--run", help="Only this run id (repeatable)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Cancel queued and running jobs (all, or those given with --run).

    Running runs checkpoint first, so a later `ladder submit` resumes them."""
    from ladder.submit import cancel as do_cancel

    cancelled = do_cancel(study_dir, run)
    if as_json:
        print_json({"cancelled": cancelled})
        return
    out.print(f"cancelled {len(cancelled)} runs" + (f": {', '.join(cancelled)}" if cancelled else ""))


@app.command()
def fit(
    study_dir: Optional[Path] = typer.Argument(None, help="A collected study directory (writes its fit.json)."),
    runs: Optional[Path] = typer.Option(None, "--runs", help="Instead: any CSV or parquet of runs with columns "
                                        "params, tokens, loss (optional flops, lr, batch_size, variant, axes)."),
    predict: Optional[list[str]] = typer.Option(None, "--predict", help="Also forecast PARAMS:TOKENS, e.g. 7e9:4e12 "
                                                "(repeatable)."),
    bootstrap: int = typer.Option(200, "--bootstrap", help="Bootstrap resamples for the 90% intervals."),
    seed: int = typer.Option(0, "--seed"),
    as_json: bool = JSON_OPT,
) -> None:
    """Fit scaling laws and forecast the hero, with 90% intervals and a recommended configuration.

    Also: a backtest, hyperparameter laws and ablation effects across scale.

    L(N, D) = E + A/N^alpha + B/D^beta (Chinchilla Approach 3, Huber loss on log-loss, bootstrap over runs);
    IsoFLOP (Approach 2) when the study has budgets; L(C) on the compute-optimal frontier; a backtest that
    refits without the largest rung and reports its forecast error. N is in the study's parameter convention.
    """
    from ladder.errors import LadderError
    from ladder.reports.fits import fit_runs_file, fit_study
    from ladder.reports.summary import print_fit

    if (study_dir is None) == (runs is None):
        raise LadderError("give a study directory or --runs FILE (exactly one)")
    if runs is not None:
        result = fit_runs_file(runs, predict=predict or [], n_boot=bootstrap, seed=seed)
    else:
        from ladder import layout
        from ladder.collect import read_results
        from ladder.plan import read_plan

        study, _ = read_plan(study_dir)
        result = fit_study(read_results(study_dir), study=study, predict=predict or [], n_boot=bootstrap, seed=seed)
        result.write(layout.StudyDir(study_dir).fit)
    if as_json:
        print_json(result.to_dict())
        return
    print_fit(result, out)
    if study_dir is not None:
        out.print(f"wrote {study_dir / 'fit.json'}")


@app.command()
def report(
    study_dir: Path = typer.Argument(..., help="A study directory (collected and fitted for the full report)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Where to write (default: <study>/report/)."),
    formats: str = typer.Option("html,pdf", "--format", help="html, pdf or html,pdf."),
    as_json: bool = JSON_OPT,
) -> None:
    """Render the study's report: one self-contained report.html (works offline) and a paginated report.pdf.

    Headline (recommended hero, forecast with its interval, ladder cost, backtest error), the ladder, loss
    curves, scaling fits with the hero extrapolation, IsoFLOP, LR/batch laws, ablations, residuals, run
    health, task forecasts and reproducibility. Sections without data say so in one line.
    """
    from ladder.errors import SpecError
    from ladder.reports.render import render_report

    try:
        paths = render_report(study_dir, out_dir, formats=formats)
    except ValueError as exc:
        raise SpecError(f"--format {formats!r}: {exc}") from None
    if as_json:
        print_json({k: str(v) for k, v in paths.items()})
        return
    for kind, path in paths.items():
        out.print(f"{kind}: {path}")


@app.command("eval")
def eval_cmd(
    study_dir: Path = typer.Argument(..., help="A study directory with finished runs."),
    tasks: Optional[str] = typer.Option(None, "--tasks", help="lm-eval task names, comma separated "
                                        "(default: the shipped offline tasks ladder_py_next_line, ladder_py_ppl)."),
    include_path: Optional[Path] = typer.Option(None, "--include-path", help="A folder of your own lm-eval task YAMLs."),
    limit: Optional[float] = typer.Option(None, "--limit", help="Examples per task (or a fraction below 1)."),
    executor: Optional[str] = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    batch_size: int = typer.Option(16, "--batch-size"),
    device: Optional[str] = typer.Option(None, "--device", help="cpu, cuda (default: cuda if available)."),
    as_json: bool = JSON_OPT,
) -> None:
    """Run the lm-evaluation-harness on every finished run's checkpoint; results land in each run's lm_eval/.

    Finished evaluations are not redone. `ladder collect` then adds task/<task>/<metric> columns, and `ladder
    fit` forecasts the hero's task loss and accuracy from them.
    """
    from ladder.submit import submit_evals

    task_list = [t.strip() for t in tasks.split(",") if t.strip()] if tasks else None
    ex = _executor_spec(study_dir, executor, {})
    res = submit_evals(study_dir, ex, tasks=task_list, include_path=include_path, limit=limit,
                       batch_size=batch_size, device=device)
    if as_json:
        print_json(res)
        return
    if not res["evaluated"]:
        out.print("nothing to evaluate: every finished run already has these results")
        return
    table = Table("run", "task", "metric", "value", title="lm-eval results", title_justify="left")
    for run_id, results in res["results"].items():
        for task, metrics in results.items():
            for metric, value in metrics.items():
                if isinstance(value, (int, float)) and metric != "sample_len":
                    table.add_row(run_id, task, metric, f"{value:.4f}")
    out.print(table)
    out.print(f"evaluated {len(res['evaluated'])} runs; `ladder collect {study_dir}` adds them to the results")


@app.command("run")
def run_cmd(
    study: str = typer.Argument("default", help="A study YAML file or built-in name (default: `default`)."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Study directory (default ./ladder-runs/<name>)."),
    executor: Optional[str] = typer.Option(None, "--executor", help=EXECUTOR_HELP),
    parallel: Optional[int] = typer.Option(None, "--parallel", help="Local CPU: runs at once."),
    gpus: Optional[str] = typer.Option(None, "--gpus", help="Local: GPU ids, e.g. 0,1."),
    skip_sanity: bool = typer.Option(False, "--skip-sanity", help="Do not overfit a tiny set first."),
) -> None:
    """The main job: plan, data, sanity check, submit, wait, evaluate, collect, fit and report.

    Resumable: run it again after Ctrl-C or a crash and it continues where it stopped (finished runs are
    kept, interrupted ones resume from their checkpoints, live jobs are waited for, not resubmitted).
    """
    from rich.console import Group
    from rich.live import Live

    from ladder.pipeline import run_study
    from ladder.plan import default_study_dir
    from ladder.status import totals
    from ladder.studies import load_study
    from ladder.studies.spec import ExecutorSpec

    spec = load_study(study)
    target = out_dir or default_study_dir(spec)
    ex = spec.executor.model_dump()
    if executor:
        ex["kind"] = executor
    if parallel is not None:
        ex["local"]["parallel"] = parallel
    if gpus is not None:
        ex["local"]["gpus"] = _parse_gpus(gpus)
    ex_spec = ExecutorSpec.model_validate(ex)

    live = Live(console=out, refresh_per_second=2, transient=False)

    def on_status(rows):
        if not live.is_started:
            live.start()
        live.update(Group(_status_table(rows, f"training: {spec.name}"), _totals_line(totals(rows))))

    try:
        outcome = run_study(study, out_dir=target, executor=ex_spec, log=lambda m: out.print(f"[bold]>[/] {m}"),
                            on_status=on_status, skip_sanity=skip_sanity)
    except KeyboardInterrupt:
        if live.is_started:
            live.stop()
        err.print(f"[yellow]interrupted[/]: runs checkpoint as they stop; `ladder run {study}` continues")
        raise typer.Exit(130) from None
    finally:
        if live.is_started:
            live.stop()
    if outcome.runs_failed:
        err.print(f"[red]{len(outcome.runs_failed)} runs failed or diverged[/]: {', '.join(outcome.runs_failed)}")
    if outcome.fit_result is not None:
        from ladder.reports.summary import print_fit

        print_fit(outcome.fit_result, out)
    if outcome.fit_error:
        err.print(f"[yellow]no fit[/]: {outcome.fit_error}")
    if outcome.report:
        out.print(f"[bold green]report[/]: {outcome.report}")
    elif outcome.stopped_after:
        out.print(f"stopped after {outcome.stopped_after}: results in {target}")


def main() -> None:
    try:
        app()
    except LadderError as exc:
        err.print(f"[bold red]error:[/] {exc}", soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
