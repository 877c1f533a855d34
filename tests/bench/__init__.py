"""Tests of the benchmark's own code (bench/): its parsing, decisions and target tables."""
