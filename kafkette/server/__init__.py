"""kafkette.server."""
