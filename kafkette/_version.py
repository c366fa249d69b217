"""The package version, in a module of its own so that any part of kafkette can
read it without importing the package root (which imports the clients)."""

__version__ = "0.1.0"
