"""The one compiled module of the project; everything else is declared in pyproject.toml.

``correlator.sources._record_native`` is the bulk ingest's hot loop in C: the ndjson adapter's
record mapping and nginx's ``combined`` access-line mapping, from the sources in
``correlator/sources/native/``: ``pip install -e .`` builds it with the system's C compiler
and Python headers. Without it the same mappings run in Python, several times slower
(``correlator.sources._native.NATIVE`` says which).
"""

from pathlib import Path

from setuptools import Extension, setup

_NATIVE = Path("correlator/sources/native")

setup(
    ext_modules=[
        Extension(
            "correlator.sources._record_native",
            sorted(str(path) for path in _NATIVE.glob("*.c")),
            depends=sorted(str(path) for path in _NATIVE.glob("*.h")),
            extra_compile_args=[
                "-O2",
                "-std=c11",
                "-fvisibility=hidden",  # only PyInit__record_native is the module's to show
                "-Wall",
                "-Wextra",
                "-Wno-unused-parameter",
            ],
        )
    ]
)
