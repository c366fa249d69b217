"""kafkette.spark_integration."""
