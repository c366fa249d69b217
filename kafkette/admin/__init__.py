"""kafkette.admin."""
