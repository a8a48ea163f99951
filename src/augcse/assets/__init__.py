"""Assets: where every model, pipeline and data file comes from (:mod:`~augcse.assets.resolve`) and how it is
fetched from its official source (:mod:`~augcse.assets.download`). Imports only :mod:`augcse.core`."""
