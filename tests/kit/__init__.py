"""Helpers shared by the tests: models, servers, clients, clocks (no tests here)."""
