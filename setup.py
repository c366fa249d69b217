"""Build of the optional C accelerators; the project's metadata is in pyproject.toml.

``optional=True``: without a compiler (or Python headers) the build skips an
extension and kafkette runs its pure-Python code.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafkette.protocol.records._speedups",
            sources=["kafkette/protocol/records/_speedups.c"],
            optional=True,
        ),
        Extension(
            "kafkette.protocol.records._columns",
            sources=["kafkette/protocol/records/_columns.c"],
            optional=True,
        ),
        Extension(
            "kafkette.protocol._produce",
            sources=["kafkette/protocol/_produce.c"],
            optional=True,
        ),
        Extension(
            "kafkette.backends._append",
            sources=["kafkette/backends/_append.c"],
            optional=True,
        ),
        Extension(
            "kafkette.producer._accumulate",
            sources=["kafkette/producer/_accumulate.c"],
            optional=True,
        ),
        Extension(
            "kafkette.server.net._splice",
            sources=["kafkette/server/net/_splice.c"],
            optional=True,
        ),
    ]
)
