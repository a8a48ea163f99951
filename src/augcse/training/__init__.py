"""Training: a recipe (:mod:`~augcse.training.recipes`) run through sentence-transformers' trainer.

:mod:`~augcse.training.run` conducts a run: :mod:`~augcse.training.build` checks its inputs and builds model,
views, loss and trainer (arguments from :mod:`~augcse.training.arguments`), :mod:`~augcse.training.ranks` keeps
the processes agreed, :mod:`~augcse.training.recovery` ends a fault in one line; :mod:`~augcse.training.trainer` is the
trainer (``from augcse.training.trainer import Trainer`` under torchrun); the callbacks, the non-finite guard,
the run folder, the budget evaluations and the model card are its parts. Imports the layers below it
(evaluation, losses, models, text, assets, core, report) and nothing above (studies, commands).
"""
