"""kafkette.testing."""
