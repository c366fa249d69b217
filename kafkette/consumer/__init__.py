"""kafkette.consumer."""
