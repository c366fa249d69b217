"""kafkette.client."""
