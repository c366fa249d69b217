"""SASL authentication for the broker's TCP listener (``SASL_PLAINTEXT``).

- :mod:`~kafkette.server.sasl.credentials`: users' salted credentials
  (:class:`CredentialStore`); no clear-text password is kept.
- :mod:`~kafkette.server.sasl.plain`, :mod:`~kafkette.server.sasl.scram`: the
  PLAIN and SCRAM-SHA-256/512 mechanisms, sans-I/O.
- :mod:`~kafkette.server.sasl.authenticator`: the per-connection state
  machine the listener drives before any other request is served, and again to
  re-authenticate (KIP-368) or close a connection whose session expired.
- :mod:`~kafkette.server.sasl.reauth`: ``connections.max.reauth.ms`` for a
  listener and each mechanism.
"""

from kafkette.server.sasl.authenticator import SaslSettings, SaslState, ServerAuthenticator, Step
from kafkette.server.sasl.credentials import (
    MECHANISMS,
    MIN_ITERATIONS,
    PLAIN,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    CredentialStore,
    ScramAlgorithm,
    ScramCredential,
    make_scram_credential,
)
from kafkette.server.sasl.mechanism import AuthenticationFailed, ServerMechanism
from kafkette.server.sasl.plain import PlainServer
from kafkette.server.sasl.scram import ScramServer

__all__ = [
    "MECHANISMS",
    "MIN_ITERATIONS",
    "PLAIN",
    "SCRAM_SHA_256",
    "SCRAM_SHA_512",
    "AuthenticationFailed",
    "CredentialStore",
    "PlainServer",
    "SaslSettings",
    "SaslState",
    "ScramAlgorithm",
    "ScramCredential",
    "ScramServer",
    "ServerAuthenticator",
    "ServerMechanism",
    "Step",
    "make_scram_credential",
]
