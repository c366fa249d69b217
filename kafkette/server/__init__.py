"""The bundled broker: a transport-agnostic core and its TCP listener.

:class:`Broker` turns request objects into response objects; the TCP
listener (:mod:`kafkette.server.listener`, run by ``kafkette serve``) and the
in-process ``memory://`` transport are thin shells around it.
"""

from kafkette.server.broker import Broker
from kafkette.server.config import BrokerConfig
from kafkette.server.dispatch import RequestContext

__all__ = ["Broker", "BrokerConfig", "RequestContext"]
