"""Core types every layer may import: settings, their kinds, errors, payloads, JSON."""
