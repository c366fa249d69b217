"""The data directory's small files (the topics file, the dynamic configs, the ACLs,
the SCRAM credentials, the producer-id block), each replaced whole at a change and
written with its fsyncs in a worker thread while the broker runs
(:mod:`~kafkette.server.kept_files.kept_file`).

May import ``errors`` and the disk backend's atomic write; no other room of the server.
"""
