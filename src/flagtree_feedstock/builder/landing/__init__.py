"""Step 6 of a build, the landing: each package the engine finished, rewritten once before it is published.

Its modules, in the order the landing runs them (docs/architecture.md, "The data path of a build", step 6):

- :mod:`.new_packages`: the entry: the packages a build wrote into the staging folder, each landed, the
  folder indexed again (:func:`~.new_packages.land_new_packages`, called by :mod:`..output_dir`);
- :mod:`.one_pass`: one package read once, its records rewritten in memory, its payload through a spool,
  written once (:func:`~.one_pass.land_package`);
- :mod:`.local_paths`: the build machine's folders (staging folder, local channels) out of its records;
- :mod:`.engine_record`: the engine's record of the build read, conda-build's in rattler-build's shape;
- :mod:`.epoch_rewrite`: the rules for its records: the engine's clock made the recipe's
  ``source_date_epoch``, the host prefix a placeholder, lists sorted, modes normal, the SBOM listed;
- :mod:`.payload_rewrite`: each payload file rewritten in pieces: the host prefix, the build folder, the
  ELF build-id from the content, the ``RECORD`` files after them;
- :mod:`.sbom`: the package's CycloneDX document, written from the engine's record and checked against
  the schema, with :mod:`._iri_syntax` (the schema's IRI grammar, loaded when an IRI is first checked).

The package is then written by the archive layer (:mod:`flagtree_feedstock._archive.package_write`) and
published by :mod:`..output_dir`.

Layer: part of :mod:`flagtree_feedstock.builder`, under its rule: may import the top-level helpers, the archive
layer, :mod:`flagtree_feedstock.recipe` and :mod:`flagtree_feedstock.channel` (``tests/test_layers.py``).
"""
