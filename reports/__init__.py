"""Fits, forecasts, figures and rendering. Reads results tables; never imports torch."""
