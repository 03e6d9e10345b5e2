"""Channel folders and servers: packages checked, indexed, smoke-installed and uploaded.

- :mod:`.folder`: a local channel folder: its packages checked whole, indexed (py-rattler), installed from;
- :mod:`.credentials`: a channel's credentials out of its URL, for rattler, bound to their origin;
- :mod:`.index_relay`: the server on loopback a solve reads instead of the channels, every byte fetched by the
  toolkit's client;
- :mod:`.index_stand_ins`: a channel indexed by py-rattler from stand-ins of its packages (their ``info/``);
- :mod:`.repack`: a foreign package repacked before the installer sees it: it gets only what the toolkit read;
- :mod:`.remote_packages`: the packages a solve took, each installed from the toolkit's own copy;
- :mod:`.link_scripts`: link and activation scripts, refused unless the package is allowed by name;
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
