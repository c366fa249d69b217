"""kafkette.consumer.assignors."""
