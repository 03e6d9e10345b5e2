"""The main job: build the rendered packages, one engine call at a time, landing each in the channel folder.

- :mod:`.command`: the ``build`` command's steps, top to bottom in one function;
- :mod:`.options`: the ``build`` command's options, defaults in one place, one frozen object;
- :mod:`.plan`: which packages to build, each once (pure);
- :mod:`.step_copies`: a step's channel of copies: what its build, host and staging environments install,
  pre-solved through the relay and repacked;
- :mod:`.run`: the plan run with py-rattler-build, each finished package published at once;
- :mod:`.package_tests`: each finished package tested by a call of its own, from the toolkit's copies only;
- :mod:`._worker`: one engine call in a process of its own session;
- :mod:`.output_dir`: the output folder as one object (:class:`~.output_dir.OutputFolder`): its lock and what
  it holds, the staging folder, the caches, each finished package landed and published;
- :mod:`.landing`: step 6, the landing: each finished package rewritten once (its own map lists its modules);
- :mod:`.sbom_files`: the SBOM outside a build: ``build --render-only --sbom`` and ``sbom PACKAGE``;
- :mod:`.conda_build`: ``--tool conda-build``/``boa``.

Layer: may import the top-level helpers (``flagtree_feedstock``'s docstring lists them), the archive layer
(:mod:`flagtree_feedstock._archive`), :mod:`flagtree_feedstock.recipe`, :mod:`flagtree_feedstock.channel` and
:mod:`flagtree_feedstock.llvm_archive` (``--llvm-archive``, part of the render step); never ``bump``,
:mod:`flagtree_feedstock.commands` or the CLI (``tests/test_layers.py``).
"""
