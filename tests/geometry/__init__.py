"""Tests of extreme_mem.geometry (package marker: keeps test module names unique)."""
