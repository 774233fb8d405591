"""Pure-array representation geometry: replica mean-field manifold analysis (MFTMA).

Modules: `mftma` (the pipeline and the per-manifold anchor stage), `anchor_qp` (the batched exact
anchor-point solver and its slow scipy twin), `center_correlation` (centre-correlation removal) and
`capacity` (empirical manifold capacity by bisection on random projections).
"""
