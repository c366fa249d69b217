"""A connection's security: TLS contexts from the ``ssl.*`` settings
(:mod:`~kafkette.client.security.tls`) and the client side of the SASL mechanisms
(:mod:`~kafkette.client.security.sasl`)."""
