"""The overfit test: before trusting a ladder, make the smallest model memorize a tiny set.

"Take 100 examples and train on them many times. The model should almost memorize them. If it cannot, the
problem is the loss function, masking, tokenizer, optimizer, gradient flow, or training code." The check uses
the trainer's own pieces (``build_model``, ``build_optimizer``, ``lr_at``, ``inputs_and_labels``), so it tests the code a
ladder will run.

What it does with ``documents`` (texts with a tokenizer, or token-id lists):

1. tokenizer: ``decode(encode(text)) == text`` for every text (texts only);
2. the set: each document becomes one window ``[EOS] + document + [EOS]`` (the context the trainer sees after a
   document boundary); windows of equal length are batched, and the loss is the mean over every target;
3. initial loss: within ``init_tolerance`` (25%) of ``ln(vocab_size)`` (a random model is uniform);
4. gradient flow: after the first backward pass every parameter has a non-zero gradient;
5. training: full-batch AdamW (no weight decay) on the mean loss of every target, short warmup then constant LR,
   until the memorizable loss is below ``stop_loss`` (``loss_threshold / 5``) with (nearly) every determined
   target right under argmax (at most ``(1 - min_match) * documents / 2`` wrong, so greedy decoding can
   reproduce the documents), or ``steps`` run out. PASS needs the final
   MEMORIZABLE loss below ``loss_threshold`` (0.05 nats/token): the mean loss over the DETERMINED targets, those
   whose context (EOS + the document so far) is continued the same way by every document that shares it. Which
   of 100 documents follows an EOS cannot be memorized (ln 100 = 4.6 nats on each first token), nor the token
   after a prefix two documents share;
6. generation: greedy decoding from EOS + the first ``max(prompt_tokens, last undetermined target + 1)`` tokens
   of each document must reproduce the rest of it exactly, for at least ``min_match`` of the documents
   (documents whose end is not determined, e.g. duplicates, are left out).

On failure the report names the first failing stage in pipeline order and what to suspect:
tokenizer -> initialisation/objective -> gradient flow -> optimization (flat: optimizer, LR or gradient flow;
decreasing but not low enough: steps, LR or capacity) -> "loss low but generation wrong": masking, label shift or
tokenizer. ``label_shift_bug=True`` trains with unshifted labels on purpose, to see that diagnosis.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ladder.model.config import OptimizerConfig, ScheduleConfig
from ladder.model.schedule import lr_at
from ladder.model.shape import ModelShape
from ladder.model.training.inputs import inputs_and_labels
from ladder.model.training.llama import build_model
from ladder.model.training.optim import build_optimizer


@dataclass
class SanityReport:
    passed: bool
    stage: str | None
    """the suspect stage when it failed: tokenizer | initialization | gradient flow | optimization | generation"""
    diagnosis: str | None
    checks: dict[str, bool]
    initial_loss: float
    ln_vocab: float
    final_loss: float
    """mean loss on the DETERMINED targets (those whose context fixes the next token): the PASS criterion"""
    final_loss_all: float
    """mean loss on every target (what is trained; includes guessing which document follows an EOS)"""
    loss_threshold: float
    memorized_fraction: float
    """share of the determined targets the model predicts right (argmax, teacher-forced)"""
    steps: int
    documents: int
    compared: int
    matched: int
    no_grad_params: list[str] = field(default_factory=list)
    tokenizer_failures: int = 0
    losses: list[float] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def match_fraction(self) -> float:
        return self.matched / self.compared if self.compared else 0.0

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["match_fraction"] = self.match_fraction
        return d

    def summary(self) -> str:
        lines = [
            f"sanity check {'PASSED' if self.passed else 'FAILED'} in {self.seconds:.1f}s: {self.documents} documents, "
            f"{self.steps} steps",
            f"  initial loss {self.initial_loss:.3f} (ln vocab {self.ln_vocab:.3f}); final loss {self.final_loss:.4f} "
            f"(threshold {self.loss_threshold:g})",
            f"  greedy generation reproduced {self.matched}/{self.compared} documents{self._left_out()}; "
            f"{100 * self.memorized_fraction:.1f}% of determined tokens right (teacher-forced)",
        ]
        if self.no_grad_params:
            lines.append(f"  no gradient: {', '.join(self.no_grad_params[:8])}")
        if not self.passed:
            lines.append(f"  suspect: {self.stage}: {self.diagnosis}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()

    def _left_out(self) -> str:
        """Why fewer documents were generated than trained on ("98/98" under "100 documents")."""
        n = self.documents - self.compared
        if n <= 0:
            return ""
        return f" (the other {n} left out: no context determines how they end, so no model can generate them)"


# ---------------------------------------------------------------------------------------------- tokenizers


def _encode(tokenizer: Any, text: str) -> list[int]:
    enc = tokenizer.encode(text)
    ids = enc.ids if hasattr(enc, "ids") else enc
    return [int(i) for i in ids]


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    try:
        return tokenizer.decode(list(ids), skip_special_tokens=False)
    except TypeError:
        return tokenizer.decode(list(ids))


def _eos_of(tokenizer: Any) -> int | None:
    eos = getattr(tokenizer, "eos_token_id", None)
    if isinstance(eos, int):
        return eos
    if hasattr(tokenizer, "token_to_id"):
        from ladder.model.data.tokenizer import special_ids

        return special_ids(tokenizer)[0]
    return None


# ---------------------------------------------------------------------------------------------- the check


def _buckets(docs: list[list[int]], eos: int) -> list[tuple[list[int], np.ndarray]]:
    """One window per document, exactly ``[EOS] + document + [EOS]`` (the context the trainer sees after a
    document boundary, and nothing from other documents); grouped by length so each group is one tensor.
    Returns ``[(document indices, windows)]``."""
    groups: dict[int, list[int]] = {}
    for i, d in enumerate(docs):
        groups.setdefault(len(d), []).append(i)
    return [
        (idx, np.asarray([[eos] + docs[i] + [eos] for i in idx], dtype=np.int64)) for _, idx in sorted(groups.items())
    ]


@torch.no_grad()
def _greedy(model: torch.nn.Module, prompts: torch.Tensor, new_tokens: int) -> torch.Tensor:
    out = prompts
    for _ in range(new_tokens):
        logits = model(input_ids=out, use_cache=False).logits[:, -1, :]
        out = torch.cat([out, logits.argmax(-1, keepdim=True)], dim=1)
    return out[:, prompts.shape[1] :]


def sanity_check(
    shape: ModelShape,
    documents: Sequence[str] | Sequence[Sequence[int]],
    tokenizer: Any = None,
    *,
    eos_id: int | None = None,
    steps: int = 400,
    lr: float = 1e-2,
    warmup_steps: int = 10,
    seed: int = 0,
    loss_threshold: float = 0.05,
    stop_loss: float | None = None,
    init_tolerance: float = 0.25,
    prompt_tokens: int = 4,
    min_match: float = 0.9,
    max_doc_tokens: int = 64,
    label_shift_bug: bool = False,
    device: str | torch.device = "cpu",
    samples: int = 3,
) -> SanityReport:
    """Overfit ``documents`` with a model of ``shape`` and report (see the module docstring). ``documents``:
    texts (then ``tokenizer`` is required: a ``tokenizers.Tokenizer`` or a transformers tokenizer) or lists of
    token ids (then ``eos_id`` is required unless a tokenizer gives it)."""
    t_start = time.perf_counter()
    stop_loss = loss_threshold / 5 if stop_loss is None else stop_loss
    if not documents:
        raise ValueError("sanity_check needs at least one document")
    texts = isinstance(documents[0], str)
    if texts and tokenizer is None:
        raise ValueError("documents are texts: pass the tokenizer")
    eos = eos_id if eos_id is not None else (_eos_of(tokenizer) if tokenizer is not None else None)
    if eos is None:
        raise ValueError("no EOS id: pass eos_id or a tokenizer that has an end-of-sequence token")

    tok_failures = 0
    if texts:
        docs = []
        for t in documents:
            ids = _encode(tokenizer, t)
            if _decode(tokenizer, ids) != t:
                tok_failures += 1
            docs.append(ids[:max_doc_tokens])
    else:
        docs = [[int(i) for i in d][:max_doc_tokens] for d in documents]
    docs = [d for d in docs if len(d) > prompt_tokens]
    if not docs:
        raise ValueError(f"every document is shorter than prompt_tokens + 1 = {prompt_tokens + 1} tokens")
    top = max(max(d) for d in docs)
    if top >= shape.vocab_size or eos >= shape.vocab_size:
        raise ValueError(f"token id {max(top, eos)} does not fit the model's vocab_size {shape.vocab_size}")

    dev = torch.device(device)
    # which targets memorization can get right: target t of document i (the token after EOS + d[:t], the EOS
    # that ends it included) is DETERMINED when every document sharing that context continues the same way
    seqs = [d + [eos] for d in docs]
    continuations: dict[tuple, set] = {}
    for s_ in seqs:
        for t in range(len(s_)):
            continuations.setdefault(tuple(s_[:t]), set()).add(s_[t])
    determined = [[len(continuations[tuple(s_[:t])]) == 1 for t in range(len(s_))] for s_ in seqs]
    # generation starts after the prompt and after the last undetermined target of the document
    starts = [max([prompt_tokens] + [t + 1 for t, ok in enumerate(det) if not ok]) for det in determined]

    buckets = []
    for idx, w in _buckets(docs, eos):
        mask = torch.tensor([determined[i] for i in idx], dtype=torch.bool, device=dev)
        buckets.append((idx, torch.from_numpy(w).to(dev), mask))
    n_targets = sum(w.shape[0] * (w.shape[1] - 1) for _, w, _ in buckets)
    n_determined = max(1, sum(int(m.sum()) for _, _, m in buckets))

    def set_loss(backward: bool) -> tuple[float, float, float]:
        """(mean next-token loss over every target: what is trained, gradients accumulated per length group;
        mean loss over the DETERMINED targets: what memorization can drive to zero, the PASS criterion;
        share of determined targets whose argmax is right, i.e. what greedy decoding will reproduce)."""
        total = memorizable = right = 0.0
        for _, w, mask in buckets:
            x, y = inputs_and_labels(w, label_shift_bug=label_shift_bug)
            logits = model(input_ids=x, use_cache=False).logits.float()
            per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="none")
            per_token = per_token.view(w.shape[0], -1)
            part = per_token.sum() / n_targets
            if backward:
                part.backward()
            total += part.item()
            memorizable += per_token.detach()[mask].sum().item() / n_determined
            right += (logits.detach().argmax(-1) == y)[mask].sum().item() / n_determined
        return total, memorizable, right

    # each wrong token breaks at most one document's greedy reproduction: allow half the documents min_match spares
    allowed_wrong = int((1.0 - min_match) * len(docs) / 2)
    model = build_model(shape, seq_len=max(len(d) for d in docs) + 2, seed=seed, device=dev, eos_token_id=eos)
    model.train()
    optimizer = build_optimizer(model, OptimizerConfig(weight_decay=0.0), lr=lr)
    schedule = ScheduleConfig(kind="constant", warmup_fraction=0.0)
    ln_vocab = math.log(shape.vocab_size)

    losses: list[float] = []
    no_grad: list[str] = []
    step = 0
    for step in range(steps):
        for g in optimizer.param_groups:
            g["lr"] = lr_at(step, peak=lr, total_steps=steps, warmup_steps=min(warmup_steps, steps), schedule=schedule)
        full, memorizable, accuracy = set_loss(backward=True)
        losses.append(full)
        if step == 0:
            no_grad = [n for n, p in model.named_parameters() if p.grad is None or not bool(torch.any(p.grad != 0))]
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        wrong = round((1.0 - accuracy) * n_determined)
        if not math.isfinite(full) or (memorizable < stop_loss and wrong <= allowed_wrong):
            break
    steps_run = step + 1

    model.eval()
    with torch.no_grad():
        final_full, final, final_accuracy = set_loss(backward=False)

    # greedy generation from EOS + each document's prompt; documents whose end is not determined are left out
    candidates = [i for i, d in enumerate(docs) if starts[i] < len(d)]
    matched = 0
    shown: list[dict[str, Any]] = []
    by_start: dict[int, list[int]] = {}
    for i in candidates:
        by_start.setdefault(starts[i], []).append(i)
    for k, group in sorted(by_start.items()):
        prompts = torch.tensor([[eos] + docs[i][:k] for i in group], dtype=torch.long, device=dev)
        generated = _greedy(model, prompts, max(len(docs[i]) for i in group) - k).cpu().tolist()
        for row, i in enumerate(group):
            want = docs[i][k:]
            got = generated[row][: len(want)]
            ok = got == want
            matched += ok
            if len(shown) < samples and (not ok or not shown):
                sample = {"prompt": docs[i][:k], "expected": want, "generated": got, "match": ok}
                if tokenizer is not None:
                    sample.update(prompt_text=_decode(tokenizer, docs[i][:k]), expected_text=_decode(tokenizer, want),
                                  generated_text=_decode(tokenizer, got))  # fmt: skip
                shown.append(sample)
    compared = len(candidates)

    checks = {
        "tokenizer_roundtrip": tok_failures == 0,
        "initial_loss_near_ln_vocab": math.isfinite(losses[0])
        and abs(losses[0] - ln_vocab) <= init_tolerance * ln_vocab,
        "every_parameter_has_gradient": not no_grad,
        "loss_below_threshold": math.isfinite(final) and final < loss_threshold,
        "generation_reproduces_documents": compared > 0 and matched >= min_match * compared,
    }
    stage, diagnosis = _diagnose(checks, losses, final, ln_vocab, loss_threshold, no_grad, tok_failures,
                                 matched, compared, final_accuracy)  # fmt: skip
    return SanityReport(
        passed=all(checks.values()), stage=stage, diagnosis=diagnosis, checks=checks, initial_loss=losses[0],
        ln_vocab=ln_vocab, final_loss=final, final_loss_all=final_full, loss_threshold=loss_threshold, memorized_fraction=final_accuracy, steps=steps_run, documents=len(docs),
        compared=compared, matched=matched, no_grad_params=no_grad, tokenizer_failures=tok_failures,
        losses=losses, samples=shown, seconds=time.perf_counter() - t_start,
    )  # fmt: skip


def _diagnose(checks, losses, final, ln_vocab, threshold, no_grad, tok_failures, matched, compared, accuracy):
    initial = losses[0]
    if not checks["tokenizer_roundtrip"]:
        return "tokenizer", (
            f"decode(encode(text)) differs from the text for {tok_failures} documents: the tokenizer is lossy "
            "(normalizer, prefix space, unknown bytes); generated text cannot match"
        )
    if not checks["initial_loss_near_ln_vocab"]:
        return "initialization", (
            f"the loss before training is {initial:.3f}, not near ln(vocab) = {ln_vocab:.3f}: check the "
            "initialisation scale (init_std), the output head, and the loss (labels, reduction, vocabulary size)"
        )
    if not checks["every_parameter_has_gradient"]:
        return "gradient flow", (
            f"{len(no_grad)} parameters got no gradient ({', '.join(no_grad[:5])}): detached, frozen, unused in "
            "the forward pass, or never reached by the loss"
        )
    if not checks["loss_below_threshold"]:
        if not math.isfinite(final) or final > 0.9 * initial:
            return "optimization", (
                f"the loss stayed flat ({initial:.3f} -> {final:.3f}): suspect the optimizer (step not applied, "
                "parameters missing from it), the learning rate (zero or far too high), or gradient flow"
            )
        return "optimization", (
            f"the loss fell from {initial:.3f} to {final:.4f} but not below {threshold:g}: more steps, a different "
            "learning rate, or a model too small to memorize the set"
        )
    if not checks["generation_reproduces_documents"] and accuracy < 0.999:
        return "optimization", (
            f"the loss is low ({final:.4f}) but {100 * (1 - accuracy):.1f}% of the memorizable tokens are still "
            f"wrong under argmax, so greedy generation reproduced only {matched}/{compared} documents: train longer "
            "or with a different learning rate (or use a bigger model)"
        )
    if not checks["generation_reproduces_documents"]:
        return "generation", (
            f"the training loss is low ({final:.4f}) and every memorized token is right when the true prefix is fed, "
            f"but greedy generation reproduced only {matched}/{compared} documents: suspect masking (the model sees future tokens), the label shift (labels must be the next "
            "token), or the tokenizer (special tokens, EOS handling, decoding)"
        )
    return None, None


def sample_documents(
    prepared: Any, *, n_docs: int = 100, min_tokens: int = 8, max_tokens: int = 32, scan_tokens: int = 1_000_000
) -> list[list[int]]:
    """The first ``n_docs`` documents of a prepared train split with at least ``min_tokens`` tokens, each cut to
    ``max_tokens`` (token ids; documents are separated by the EOS id)."""
    from ladder.model.data.windows import token_files

    docs: list[list[int]] = []
    for f in token_files(prepared.train_dir):
        tokens = np.memmap(f, dtype=np.dtype(prepared.token_dtype), mode="r")[:scan_tokens]
        ends = np.flatnonzero(tokens == prepared.eos_id)
        start = 0
        for end in ends:
            doc = tokens[start:end]
            start = end + 1
            if len(doc) >= min_tokens:
                docs.append([int(t) for t in doc[:max_tokens]])
                if len(docs) >= n_docs:
                    return docs
    return docs


def run_sanity(
    prepared: Any, shape: ModelShape, *, n_docs: int = 100, max_doc_tokens: int = 32, **kwargs: Any
) -> SanityReport:
    """:func:`sanity_check` on ``n_docs`` short documents of a ``PreparedData``'s train split, with its tokenizer
    (for readable samples) and EOS."""
    from ladder.model.data.tokenizer import load_tokenizer

    docs = sample_documents(prepared, n_docs=n_docs, max_tokens=max_doc_tokens)
    if not docs:
        from ladder.errors import DataError

        raise DataError(f"no document of at least 8 tokens in {prepared.train_dir}")
    tok = load_tokenizer(prepared.tokenizer_dir)
    return sanity_check(shape, docs, tok, eos_id=prepared.eos_id, max_doc_tokens=max_doc_tokens, **kwargs)
