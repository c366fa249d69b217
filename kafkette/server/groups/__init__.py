"""The group coordinator: consumer group membership and committed offsets.

``store`` defines how groups and offsets are kept (Kafka's ``__consumer_offsets``
records); the coordinator keeps the live state and answers the group APIs.
"""
