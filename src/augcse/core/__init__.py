"""The base layer: what every other layer may use and that imports nothing of augcse above it.

Names and did-you-mean (:mod:`~augcse.core.names`), the validation schema (:mod:`~augcse.core.schema`),
reading text files (:mod:`~augcse.core.textfile`), writing outputs (:mod:`~augcse.core.outputs`), the
Markdown/HTML document model (:mod:`~augcse.core.document`), the declared parameters of every loss (recipes
are checked against them before torch loads: :mod:`~augcse.core.loss_parameters`), the named augmentation sets both the text and
the model side speak of (:mod:`~augcse.core.augmentation_sets`), reading YAML with duplicate keys refused
(:mod:`~augcse.core.yamlfile`) and the version.
"""
