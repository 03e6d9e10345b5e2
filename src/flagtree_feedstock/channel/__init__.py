"""Channel folders and servers: packages checked, indexed, smoke-installed and uploaded.

- :mod:`.package_check`: the whole-package check: a package file read whole and safe, named after itself;
- :mod:`.folder`: a local channel folder: its package files listed, the channels a command is given checked;
- :mod:`.index`: a channel folder indexed with py-rattler, from its packages' stand-ins;
- :mod:`.index_stand_ins`: the small stand-ins of the packages that py-rattler's indexer reads instead;
- :mod:`.install`: a solve and an install with py-rattler (``channel install``), from the toolkit's own copies;
- :mod:`.repack`: a package repacked by the toolkit's reader and writer (the only copy an installer gets), cached;
- :mod:`.download`: a remote channel's package downloaded by the toolkit, checked against the channel's index;
- :mod:`.link_scripts`: the link and activation scripts a package carries, run only where allowed by name;
- :mod:`.credentials`: a channel's credentials out of its URL, held by the toolkit, bound to their origin;
- :mod:`.index_relay`: the server on loopback a solve reads instead of the channels, every byte fetched by the
  toolkit's client;
- :mod:`.upload`: a channel folder published to prefix.dev or anaconda.org;
- :mod:`.upload_api`: the requests of each server's upload API;
- :mod:`.package_reader`: a package file read whole and bounded, its paths and links checked;
- :mod:`.package_info`: a package file's index.json and about.json, which anaconda.org's API is given;
- :mod:`.server_files`: what an upload server already holds under a package's file name;
- :mod:`.trusted_publishing`: a GitHub job's OIDC token exchanged for a short-lived prefix.dev key;
- :mod:`.attestations`: the CEP 27 attestations sent with the packages, checked against them.

Layer: may import the top-level helpers (``flagtree_feedstock``'s docstring lists them) and the archive layer
(:mod:`flagtree_feedstock._archive`), nothing else of the package (``tests/test_layers.py``).
"""
