"""`ladder fit --runs` on a published ladder a user brings (re-trial 16b), and the mistakes made converting one.

The trial converted Porian et al.'s, Epoch's, Li et al.'s and Beck et al.'s ladders into the CSV that `fit --runs`
reads. Every table here is synthetic (a known Chinchilla law laid out the way those ladders are), so nothing of
the published data is read or shipped.
"""

from __future__ import annotations

import math
from pathlib import Path

from tests.cli_helpers import one_line, run_cli


def law(n: float, d: float) -> float:
    return 1.8 + 482 / n**0.35 + 2085 / d**0.37


def write(path: Path, rows: list[dict]) -> Path:
    cols = list(dict.fromkeys(k for row in rows for k in row))
    lines = [",".join(cols)] + [
        ",".join(f"{row[c]!r}" if isinstance(row[c], float) else str(row[c]) for c in cols) for row in rows
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def isoflop(budgets: int = 7, first: float = 1.25e16) -> list[dict]:
    """Porian et al.'s design: budgets in x2 steps, five sizes around each budget's optimum."""
    rows = []
    for k in range(budgets):
        c = first * 2**k
        n_opt = math.sqrt(c / 6 / 20)
        for f in (0.25, 0.5, 1.0, 2.0, 4.0):
            n = n_opt * f
            d = c / 6 / n
            rows.append({"params": n, "tokens": d, "loss": law(n, d)})
    return rows


def test_a_top_run_typed_from_the_table_is_not_beyond_the_tested_distance_by_rounding(tmp_path, capsys):
    """Fitted on the budgets up to 8e17, the forecast of the ladder's own 2.56e19 budget (32x) typed in from the
    published table (7 digits) was "beyond what the rollout tested (... the forecast at 32x, the rollout tested up
    to 32x ...)": its distance was 32.0000006x, the rollout's 32x, and the distance was judged to 1e-9 where each
    axis is judged to 0.01%."""
    rows = isoflop()
    runs = write(tmp_path / "porian_like.csv", rows)
    top_c = max(6 * r["params"] * r["tokens"] for r in rows)
    n = max(r["params"] for r in rows)
    d = 32 * top_c / 6 / n * (1 + 2e-8)
    point = f"{n!r}:{d!r}"
    args = ("fit", "--runs", runs, "--predict", point, "--bootstrap", "20")
    got = run_cli(capsys, *args, "--json")
    assert got.code == 0, got.stderr
    p = got.json()["predictions"][0]
    dist = p["distance"]
    assert math.isclose(dist["distance_x"], dist["tested_distance_x"], rel_tol=1e-6), dist
    assert p["beyond_tested"] is False, dist
    text = run_cli(capsys, *args)
    assert "beyond what the rollout tested" not in text.stdout + text.stderr


def test_the_farthest_axis_beyond_the_tested_distance_is_said_in_digits_that_tell_them_apart():
    """When only the farthest-axis distance passes the rollout's (no one axis does), the words said "the forecast
    at 32x, the rollout tested up to 32x" of 32.01x: no excess to read."""
    from ladder.reports.fits.study.study_hero import tested_words

    words = tested_words(
        {"distance_x": 32.01, "tested_distance_x": 32.0, "beyond_tested_axes": [], "tested": {}}, "the forecast"
    )
    assert "the forecast at 32.01x, the rollout tested up to 32x" in words, words


def test_an_isoflop_tables_flops_in_the_tokens_column_are_named_as_flops(tmp_path, capsys):
    """A user who put Porian's budget column (1.25e16 to 8e17 FLOPs) where the tokens go was told "give plain
    counts", and a small ladder's FLOPs (under 1P) were warned as "params written in millions or thousands?" of
    params that were plain counts: neither named the FLOPs."""
    big = [{"params": r["params"], "tokens": 6 * r["params"] * r["tokens"], "loss": r["loss"]} for r in isoflop()]
    one_line(run_cli(capsys, "fit", "--runs", write(tmp_path / "big.csv", big)), "tokens is beyond 1P", "FLOP")
    small = [
        {"params": n, "tokens": 6 * n * (r * n), "loss": law(n, r * n)}
        for n in (1e5, 2e5, 4e5, 8e5)
        for r in (10, 20, 40)
    ]
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "small.csv", small), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    said = [w for w in got.json()["warnings"] if "tokens per parameter" in w]
    assert said and "FLOP" in said[0], got.json()["warnings"]


def test_tokens_written_in_millions_are_named_as_a_cause(tmp_path, capsys):
    """Tokens in millions (36.3 to 3,598 for 36M to 3.6B) were warned as "columns swapped, or a step count?" only."""
    rows = [{**r, "tokens": r["tokens"] / 1e6} for r in isoflop(budgets=4)]
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "m.csv", rows), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    said = [w for w in got.json()["warnings"] if "fewer tokens than parameters" in w]
    assert said and "millions" in said[0], got.json()["warnings"]


def test_many_variants_of_which_some_share_rungs_are_not_said_to_share_none(tmp_path, capsys):
    """All 15 of Porian's configurations with a variant column: the main variant was "the first in the table: the
    variants (...) share no rung", while several pairs of them trained the same params x tokens."""
    rows = []
    for v, sizes in (("a", (1e6, 2e6, 4e6)), ("b", (1e6, 2e6, 4e6)), ("c", (1.5e6, 3e6, 6e6))):
        for n in sizes:
            for r in (10, 20, 40):
                rows.append(
                    {"params": n, "tokens": r * n, "loss": law(n, r * n) * (1.02 if v != "a" else 1), "variant": v}
                )
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "v.csv", rows), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    why = got.json()["loss"]["variant_choice"]
    assert "first variant in the table" in why and "share no rung" not in why, why
    assert "no rung that all 3 trained" in why, why


def test_runs_of_another_schedule_at_the_same_points_are_warned_without_a_seed_column(tmp_path, capsys):
    """Porian et al.'s cosine-to-budget runs with the same sizes' losses read part-way through a longer run mixed
    in (54 params x tokens points twice, losses up to 5.6% apart): fitted without a word. Each point's runs were
    fitted as runs of their own, with no noise floor; a seed column or a variant column says what they are."""
    rows = isoflop(budgets=4)
    mid_run = [{**r, "loss": r["loss"] * 1.04} for r in rows]
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "mixed.csv", rows + mid_run), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    said = [w for w in got.json()["warnings"] if "params x tokens point" in w]
    assert said and "20 params x tokens point(s) hold 40 runs" in said[0] and "4.0%" in said[0], said
    assert "seed column" in said[0] and "variant column" in said[0], said
    seeds = [{**r, "seed": 0} for r in rows] + [{**r, "seed": 1} for r in mid_run]
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "seeds.csv", seeds), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    assert not [w for w in got.json()["warnings"] if "params x tokens point" in w], got.json()["warnings"]


def test_the_rollouts_error_at_the_forecasts_own_distance_is_not_said_unmeasured_there():
    """Porian's ladder fitted below 1e18 FLOPs, a point at 31.2x compute but 7.23x tokens (the rollout's: 6.48x):
    its farthest forecasts at 16-32x (in their farthest axis, as the forecast's 31.2x) were said to be "not measured
    at the forecast's distance"; only its tokens lay beyond them."""
    from ladder.reports.fits.study.study_hero import tested_words

    far = {"n": 18, "min_distance_x": 16.0, "max_distance_x": 32.0, "median_abs_err_pct": 23.6}
    tested = {"params_x": 14.2, "tokens_x": 6.48, "compute_x": 32.0, "distance_x": 32.0}
    dist = {"params_x": 0.724, "tokens_x": 7.23, "compute_x": 31.2, "distance_x": 31.2, "tested": tested}
    words = tested_words({**dist, "beyond_tested_axes": ["tokens"], "rollout_error": far}, "the forecast")
    assert "not measured at the forecast's distance" not in words, words
    assert "at the forecast's distance in the farthest axis, but not as far in tokens" in words, words
    farther = {**dist, "params_x": 2.0, "compute_x": 64.0, "distance_x": 64.0}
    words = tested_words({**farther, "beyond_tested_axes": ["tokens", "compute"], "rollout_error": far}, "the forecast")
    assert "(not measured at the forecast's distance)" in words, words


def test_distinct_runs_near_one_point_are_not_said_to_be_one_point_twice(tmp_path, capsys):
    """Epoch's extraction of Chinchilla holds runs of one size at 22.3B and 23.2B tokens (4.3% apart, within a
    rung's 5%): the repeated-point warning called them one params x tokens point holding two runs."""
    rows = isoflop(budgets=4)
    near = [{**r, "tokens": r["tokens"] * 1.043, "loss": law(r["params"], r["tokens"] * 1.043)} for r in rows]
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "near.csv", rows + near), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    assert not [w for w in got.json()["warnings"] if "params x tokens point" in w], got.json()["warnings"]


def test_a_flops_column_in_another_unit_is_warned(tmp_path, capsys):
    """Porian's budgets given in PFLOPs (12.5 to 800): accepted without a word, and fit.json's IsoFLOP budgets read
    "flops: 12.5" of runs of 1.25e16, its N_opt(C) law in those units. A flops column off 6ND by a few times (FLOPs
    counted with attention) is no unit mistake and is not warned."""
    rows = isoflop(budgets=4)
    pflops = [{**r, "flops": 6 * r["params"] * r["tokens"] / 1e15} for r in rows]
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "pflops.csv", pflops), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    said = [w for w in got.json()["warnings"] if "flops column" in w]
    assert said and "another unit" in said[0] and "6ND is 12.5P" in said[0], got.json()["warnings"]
    counted = [{**r, "flops": 2.5 * 6 * r["params"] * r["tokens"]} for r in rows]
    got = run_cli(capsys, "fit", "--runs", write(tmp_path / "counted.csv", counted), "--bootstrap", "3", "--json")
    assert got.code == 0, got.stderr
    assert not [w for w in got.json()["warnings"] if "flops column" in w], got.json()["warnings"]


def test_the_terminal_gives_the_compute_optimal_exponents_with_the_intervals_fit_json_has(tmp_path, capsys):
    """Beck et al.'s isoFLOP groups, cut by 6ND into 8 budgets within 2x of compute, printed "isoflop: N_opt ~
    C^0.146 over 8 budgets" and "(isoflop: a = 0.146)", where fit.json's 90% interval was [-0.204, 0.42]."""
    import re

    runs = write(tmp_path / "iso.csv", isoflop(budgets=4))
    args = ("fit", "--runs", runs, "--bootstrap", "20")
    j = run_cli(capsys, *args, "--json").json()
    text = run_cli(capsys, *args).stdout
    num = r"(-?[\d.]+(?:e[-+]?\d+)?)"
    iso = re.search(rf"isoflop: N_opt ~ C\^{num} \[{num}, {num}\] over", text)
    assert iso, text
    lo, hi = j["isoflop"]["ci90"]["a"]
    assert math.isclose(float(iso[2]), lo, rel_tol=0.01) and math.isclose(float(iso[3]), hi, rel_tol=0.01), iso[0]
    co = re.search(rf"N\* ~ C\^{num} \[{num}, {num}\], D\* ~ C\^{num} \[{num}, {num}\] \(isoflop: a = {num} \[", text)
    assert co, text
    lo, hi = j["compute_optimal"]["ci90"]["a"]
    assert math.isclose(float(co[2]), lo, rel_tol=0.01) and math.isclose(float(co[3]), hi, rel_tol=0.01), co[0]


def test_the_first_point_note_does_not_say_the_others_move_only_a_little(tmp_path, capsys):
    """Porian et al.'s top run (455M, 9.37B tokens), fitted below 1e18 FLOPs: 3.216 [2.451, 4.220] given first, 3.219
    [3.099, 3.344] given after a point at 47 tokens/param (its rollout, calibrated there, tested 16x, not 32x), while
    the note said "the other points' forecasts move a little with it"."""
    runs = write(tmp_path / "iso.csv", isoflop(budgets=4))
    r = run_cli(
        capsys, "fit", "--runs", runs, "--predict", "3e8:1.4e10", "--predict", "4.5e8:9.4e9", "--bootstrap", "3"
    )
    assert r.code == 0, r.stderr
    said = [x for x in r.stdout.splitlines() if "weighted for the first point" in x]
    assert len(said) == 1 and "a little" not in said[0], said
    assert "forecasts and intervals move with it" in said[0], said


def test_a_table_in_its_own_column_names_is_told_how_to_read_them(tmp_path, capsys):
    """A published ladder written out in its own names (N, D, eval/loss) was refused with the names it lacks and the
    names it has, and no word of --columns, which reads them as they are."""
    path = tmp_path / "own_names.csv"
    path.write_text("N,D,eval/loss\n1e6,2e7,3.2\n2e6,4e7,3.0\n")
    one_line(run_cli(capsys, "fit", "--runs", path), "it has N, D, eval/loss", "--columns params=COLUMN,tokens=COLUMN")
