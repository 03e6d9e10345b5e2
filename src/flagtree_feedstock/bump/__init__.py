"""``flagtree-feedstock bump``: move the pins to a new FlagTree commit, checked before anyone builds.

- :mod:`.run`: the new pins computed, the checks run, the files written;
- :mod:`.checks`: the checks a new upstream commit must pass;
- :mod:`.patching`: our patch series applied with GNU patch, and refreshed;
- :mod:`.cmake_scan`, :mod:`.cpu_api`: what FlagTree's CMake links and where FlagTree and flagtree-cpu meet;
- :mod:`._git`: one commit of a local clone, read through git's plumbing.

Layer: may import the top-level helpers (``flagtree_feedstock``'s docstring lists them), the archive layer
(:mod:`flagtree_feedstock._archive`) and :mod:`flagtree_feedstock.recipe`; never ``builder``, ``channel``, ``llvm_archive``,
:mod:`flagtree_feedstock.commands` (which holds the command's options and its report) or the CLI
(``tests/test_layers.py``).
"""
