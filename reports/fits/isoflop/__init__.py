"""IsoFLOP profiles (Approach 2): per compute budget the loss-minimizing model size, then the allocation laws
N_opt(C), D_opt(C) and the minimum-loss law L*(C) across budgets, fitted by the one engine (numpy/scipy only)."""

from ladder.reports.fits.isoflop.isoflop_fit import IsoFlopFit, fit_isoflop

__all__ = ["IsoFlopFit", "fit_isoflop"]
