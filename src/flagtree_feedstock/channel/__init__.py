"""Channel folders and servers: packages checked, indexed, smoke-installed and uploaded.

- :mod:`.folder`: a local channel folder: its packages checked whole, indexed (py-rattler), installed from;
- :mod:`.upload`: a channel folder published to prefix.dev or anaconda.org;
- :mod:`.server_files`: what an upload server already holds under a package's file name.

Layer: may import the top-level helpers (``errors``, ``platforms``, ``_engine``, ``_interrupts``, ``_paths``,
``_progress``, ``_subprocess``) and nothing else of the package (``tests/test_layers.py``).
"""
