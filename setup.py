"""The one build step pyproject.toml cannot declare portably: coniti's optional compiled kernels.

``coniti.structure._kernels`` (exact scoring and the top-k candidate step; see its source) is built
when a C compiler is at hand. ``optional=True``: without one the install still succeeds and coniti
uses the numpy twins of the same functions, which give the same results bit for bit.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "coniti.structure._kernels",
            ["coniti/structure/_kernels.c"],
            # -ffp-contract=off: no fused multiply-adds, whose single rounding would break the
            # exact split's reasoning on machines that have them
            extra_compile_args=["-O3", "-ffp-contract=off"],
            optional=True,
        )
    ]
)
