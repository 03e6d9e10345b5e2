from ._entry import entrypoint

entrypoint()
