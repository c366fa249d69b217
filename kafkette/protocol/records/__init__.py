"""kafkette.protocol.records."""
