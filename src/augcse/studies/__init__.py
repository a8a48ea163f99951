"""Studies: grids of runs (recipe × seed) trained and scored resumably (:mod:`~augcse.studies.runs`), a
user's own grid (:mod:`~augcse.studies.study`) and the papers' tables (:mod:`~augcse.studies.reproduce`,
with the published figures, the paper settings and the coverage of the papers' tables)."""
