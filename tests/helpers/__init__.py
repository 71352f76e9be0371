"""Helpers the tests and the benchmarks share; fixtures stay in the conftest files."""
