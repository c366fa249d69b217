"""kafkette.producer."""
