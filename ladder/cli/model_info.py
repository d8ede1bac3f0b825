"""`ladder model info`: parameter and FLOP accounting of a Llama shape."""

from __future__ import annotations

import typer
from rich.table import Table

from ladder.cli.options import JSON_OPT, MAX_SEQ_LEN, MAX_VOCAB, positive_number
from ladder.console import out, print_json

app = typer.Typer(help="Parameter and FLOP accounting of Llama shapes.", no_args_is_help=True)


@app.command("info")
def model_info(
    d_model: int | None = typer.Option(
        None, "--d-model", help="Hidden size: a whole number of heads, up to 1,048,576."
    ),
    n_layers: int | None = typer.Option(None, "--n-layers", help="Number of layers, 1 to 1,024."),
    n_heads: int | None = typer.Option(None, "--n-heads", help="Query heads (default d_model / head_dim)."),
    n_kv_heads: int | None = typer.Option(None, "--n-kv-heads", help="KV heads (default n_heads / kv_ratio)."),
    head_dim: int | None = typer.Option(None, "--head-dim", help="Head dimension (default d_model / n_heads or 64)."),
    ffn_dim: int | None = typer.Option(
        None, "--ffn-dim", help="SwiGLU width (default 8/3 d_model, rounded to a multiple of 16)."
    ),
    vocab_size: int = typer.Option(
        49152, "--vocab-size", help="Vocabulary size (rows of the embedding), 1 to 16,777,216."
    ),
    tied: bool = typer.Option(True, "--tied/--untied", help="Tie the LM head to the input embedding."),
    seq_len: int = typer.Option(2048, "--seq-len", help="Context length for the attention FLOPs, 1 to 1,048,576."),
    params: str | None = typer.Option(
        None,
        "--params",
        help="Instead of a shape: a target size such as 135M (at most 1e15), sized at --aspect-ratio.",
    ),
    convention: str | None = typer.Option(
        None, "--convention", help="total | non_embedding, for --params (default: total)."
    ),
    aspect_ratio: float | None = typer.Option(
        None, "--aspect-ratio", help="d_model / n_layers, for --params: above 0, at most 10,000 (default: 32)."
    ),
    kv_ratio: int = typer.Option(
        1, "--kv-ratio", help="Query heads per KV head (GQA), 1 or more: KV heads = heads / ratio."
    ),
    as_json: bool = JSON_OPT,
) -> None:
    """Parameter counts (total / embedding / non-embedding) and training FLOPs per token of a shape.

    Give an explicit shape (--d-model --n-layers ...) or a target size (--params 135M --aspect-ratio 19.2).
    Example: the SmolLM2-135M shape, `ladder model info --d-model 576 --n-layers 30 --n-heads 9
    --n-kv-heads 3 --ffn-dim 1536 --vocab-size 49152` has 134,515,008 parameters tied.
    """
    from pydantic import ValidationError

    from ladder.errors import SpecError
    from ladder.model.config import format_count, format_multiple, positive_count
    from ladder.model.shape import ModelShape
    from ladder.model.sizing import FamilyRules, shape_for_params
    from ladder.plan.plausibility import MAX_TARGET
    from ladder.studies.spec import MAX_ASPECT_RATIO, MAX_LAYERS

    width = 2**20  # far wider than any model's: refuses only absurd numbers, which no shape check names well
    for option, value, most in (
        ("--d-model", d_model, width),
        ("--n-layers", n_layers, MAX_LAYERS),  # the bound of a study's model.max_layers
        ("--n-heads", n_heads, width),
        ("--n-kv-heads", n_kv_heads, width),
        ("--head-dim", head_dim, width),
        ("--ffn-dim", ffn_dim, width),
        ("--vocab-size", vocab_size, MAX_VOCAB),
        ("--seq-len", seq_len, MAX_SEQ_LEN),  # the bound of a study's data.seq_len
    ):
        if value is not None and value < 1:
            raise SpecError(f"{option} {value}: must be a positive whole number")
        if value is not None and value > most:
            raise SpecError(f"{option} {value}: must be a whole number from 1 to {most:,}")
    if kv_ratio > width:
        raise SpecError(f"--kv-ratio {kv_ratio}: must be a whole number from 1 to {width:,} query heads per KV head")
    # an option the chosen way of giving the shape does not read is refused, not ignored (as --kv-ratio once was)
    if params is not None:
        if d_model is not None or n_layers is not None:
            raise SpecError("give either an explicit shape (--d-model, --n-layers) or --params, not both")
        for option, value in (("--n-heads", n_heads), ("--n-kv-heads", n_kv_heads), ("--ffn-dim", ffn_dim)):
            if value is not None:
                raise SpecError(
                    f"{option} {value}: --params sizes the shape itself (from --head-dim, --kv-ratio and "
                    "--aspect-ratio); give an explicit shape (--d-model, --n-layers) to set it"
                )
    else:
        for option, value in (("--aspect-ratio", aspect_ratio), ("--convention", convention)):
            if value is not None:
                shown = f"{value:g}" if isinstance(value, float) else value
                raise SpecError(f"{option} {shown}: goes with --params (a target size), not with an explicit shape")
    convention = convention or "total"
    aspect_ratio = 32.0 if aspect_ratio is None else aspect_ratio
    try:
        if params is not None:
            if convention not in ("total", "non_embedding"):
                raise SpecError(f"--convention {convention!r}: must be 'total' or 'non_embedding'")
            what = "a positive count such as 50K, 135M or 7e9"
            target = positive_count(params, "--params", what, at_least_one=True)
            if target > MAX_TARGET:  # the bound of a study's sizes and of `ladder hero --params`
                raise SpecError(
                    f"--params {params!r}: beyond what this family builds (at most {format_count(MAX_TARGET)} "
                    "parameters)"
                )
            positive_number(aspect_ratio, "--aspect-ratio", "a positive number (d_model / n_layers), e.g. 19.2")
            if aspect_ratio > MAX_ASPECT_RATIO:
                raise SpecError(
                    f"--aspect-ratio {aspect_ratio:g}: must be at most {MAX_ASPECT_RATIO:g}, as a study's "
                    "model.aspect_ratio (d_model / n_layers; real models: about 10 to 300)"
                )
            if kv_ratio < 1:
                raise SpecError(f"--kv-ratio {kv_ratio}: must be a whole number of query heads per KV head, >= 1")
            if (head_dim or 64) % 2:
                raise SpecError(f"--head-dim {head_dim}: must be even (rotary embeddings)")
            rules = FamilyRules(
                vocab_size=vocab_size,
                head_dim=head_dim or 64,
                kv_ratio=kv_ratio,
                max_seq_len=seq_len,
            )
            shape = shape_for_params(int(target), convention, aspect_ratio, rules, tied)
            got = shape.params(convention)
            if not 0.5 <= got / target <= 2:
                if got > target:  # the smallest shape at these settings: say which setting keeps it large
                    emb = shape.params_embedding
                    hint = (
                        f"; its embedding alone has {emb:,} ({vocab_size:,} x {shape.d_model}): give a smaller "
                        "--vocab-size, or --convention non_embedding"
                        if convention == "total" and emb >= target / 2
                        else f"; a smaller --head-dim (now {head_dim or 64}) builds smaller models"
                    )
                else:
                    hint = "; another --aspect-ratio may reach it"
                raise SpecError(
                    f"--params {params!r}: the nearest shape at --aspect-ratio {aspect_ratio:g} has "
                    f"{got:,} {convention} parameters ({format_multiple(got / target)} the target): outside what "
                    f"this family builds{hint}"
                )
        else:
            if d_model is None or n_layers is None:
                raise SpecError("give --d-model and --n-layers (or --params with --aspect-ratio)")
            hd = head_dim or (d_model // n_heads if n_heads else 64)
            if n_heads is None and d_model % hd:  # d_model // hd heads would leave part of the width headless
                given = f"--head-dim {head_dim}" if head_dim else "the default head_dim of 64"
                raise SpecError(
                    f"--d-model {d_model}: not a whole number of heads of {given}; give a d_model that is a "
                    "multiple of it, another --head-dim, or --n-heads"
                )
            heads = n_heads or d_model // hd
            if kv_ratio < 1:
                raise SpecError(f"--kv-ratio {kv_ratio}: must be a whole number of query heads per KV head, >= 1")
            if n_kv_heads is None and heads % kv_ratio:
                raise SpecError(
                    f"--kv-ratio {kv_ratio}: does not divide the {heads} query heads; give a ratio that "
                    "does, or --n-kv-heads"
                )
            if n_kv_heads is not None and kv_ratio != 1 and n_kv_heads * kv_ratio != heads:
                raise SpecError(
                    f"--kv-ratio {kv_ratio} and --n-kv-heads {n_kv_heads} disagree ({heads} query "
                    "heads): give one of them"
                )
            shape = ModelShape(
                d_model=d_model,
                n_layers=n_layers,
                n_heads=heads,
                n_kv_heads=n_kv_heads or heads // kv_ratio,
                head_dim=hd,
                ffn_dim=ffn_dim or max(16, int(round(8 * d_model / 3 / 16)) * 16),
                vocab_size=vocab_size,
                tied=tied,
                max_seq_len=seq_len,
            )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        field = ".".join(str(p) for p in first["loc"]) or "shape"
        raise SpecError(f"{field}: {first['msg'].removeprefix('Value error, ')}") from None
    info = shape.accounting(seq_len)
    if as_json:
        print_json(info)
        return
    table = Table(
        "quantity",
        "value",
        title=f"Llama {shape.describe()} ffn {shape.ffn_dim} vocab {shape.vocab_size}"
        f" {'tied' if shape.tied else 'untied'}",
    )
    table.add_row("params total", f"{info['params_total']:,}")
    table.add_row("params embedding", f"{info['params_embedding']:,}")
    table.add_row("params non-embedding", f"{info['params_non_embedding']:,}")
    table.add_row(f"FLOPs/token (train, seq {seq_len}, head + causal attention)", f"{info['flops_per_token']:,}")
    table.add_row("FLOPs/token 6N (N = params total)", f"{info['flops_per_token_6n']:,}")
    out.print(table)
