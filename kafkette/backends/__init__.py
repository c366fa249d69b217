"""kafkette.backends."""
