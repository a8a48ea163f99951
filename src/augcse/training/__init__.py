"""Training: a recipe (:mod:`~augcse.training.recipes`) run through sentence-transformers' trainer.

:mod:`~augcse.training.run` builds model, views and loss and trains; :mod:`~augcse.training.trainer` is the
trainer (``from augcse.training.trainer import Trainer`` under torchrun); the callbacks, the non-finite guard,
the run folder, the budget evaluations and the model card are its parts. Imports the layers below it
(evaluation, losses, models, text, assets, core, report) and nothing above (studies, commands).
"""
