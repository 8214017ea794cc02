"""Experiment engine: trials, scoring, statistics and tracking (grows with issues B-D)."""
