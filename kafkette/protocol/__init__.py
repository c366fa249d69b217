"""kafkette.protocol."""
