"""Per-example gradient statistics (DESIGN.md section 5): `stats.GradStats`, the engines in
`engine.PerExampleGradients` and the factored Dense/Conv2D math in `factored`."""
