"""A broker's data directory as a whole: the lock that keeps one broker per
directory (:mod:`~kafkette.server.data_dir.lock`) and serving a directory
read-only (:mod:`~kafkette.server.data_dir.read_only`: the refusals of requests
that would write).

May import ``protocol``, ``errors`` and the core's leaves (``dispatch``); the
partition logs inside the directory are ``kafkette.backends``'.
"""
