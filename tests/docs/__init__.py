"""The examples of README.md and docs/*.md, run as tests (see conftest.py)."""
