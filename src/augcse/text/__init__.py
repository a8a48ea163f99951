"""The text side: what is built from sentences before any model sees them.

Rule-based augmentations (:mod:`~augcse.text.augment`), the training corpus (:mod:`~augcse.text.corpus`),
the view builders that turn it into the columns a loss reads (:mod:`~augcse.text.views`) and nearest-neighbour
retrieval over embeddings (:mod:`~augcse.text.retrieval`, CARDS' hard negatives). Never imports a loss.
"""
