"""The one compiled module of the project; everything else is declared in pyproject.toml.

``correlator.sources._record_native`` is the ndjson adapter's record mapping in C (the bulk
ingest's hot loop): ``pip install -e .`` builds it with the system's C compiler and Python
headers. Without it the same mapping runs in Python, several times slower
(``correlator.sources._record_batch.NATIVE`` says which).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "correlator.sources._record_native",
            ["correlator/sources/_record_native.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ]
)
