"""The model side: poolers saved in the model (:mod:`~augcse.models.poolers`) and loading any
sentence-transformers folder or name (:mod:`~augcse.models.load`, exported as ``augcse.load_model``)."""
