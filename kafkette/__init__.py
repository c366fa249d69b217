"""kafkette: Kafka for Python.

Producers, consumers and an admin client speaking the Kafka wire protocol, a
bundled broker (``kafkette serve``) and an in-memory fake (``memory://``).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
