"""The recipe and its variants: what the feedstock builds, read before anything is built.

- :mod:`.variants`: the variant files (``conda_build_config.yaml``), checked against the keys both recipes use;
- :mod:`.render`: ``recipe/recipe.yaml`` rendered with them through py-rattler-build, offline;
- :mod:`.sources`: each rendered output's sources, as the engine will fetch them;
- :mod:`.engine_inputs`: the build scripts, patches and recipe folder the engine reads itself, checked first;
- :mod:`.pins`: the pins of ``recipe/conda_build_config.yaml``, read and rewritten in place.
- :mod:`.package_scripts`: the packages the recipe folder allows to run their link and activation scripts.
- :mod:`.staged_recipes`: the recipe folder of a conda-forge staged-recipes pull request, computed from it.

Layer: may import the top-level helpers (``flagtree_feedstock``'s docstring lists them) and nothing else of
the package (``tests/test_layers.py``).
"""
